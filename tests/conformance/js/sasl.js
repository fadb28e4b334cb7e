#!/usr/bin/env node
// kafkajs over SASL_PLAINTEXT (or SASL_SSL with EBB_TLS=1) for tests/security:
//
//   node sasl.js <bootstrap> <mechanism> <user> <password> <topic>
//
// Produces one record and reads the topic's metadata back, then prints one JSON line:
// {"ok": true, "offset": "<offset>", "brokers": [...]} or {"ok": false, "error": {...}}.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, mechanism, username, password, topic] = process.argv.slice(2)
const watchdog = setTimeout(() => {
  console.log(JSON.stringify({ ok: false, error: { name: 'Watchdog', message: 'sasl.js hung' } }))
  process.exit(2)
}, 25000)

const kafka = new Kafka({
  clientId: 'ebb-sasl-kafkajs',
  brokers: [bootstrap],
  connectionTimeout: 3000,
  requestTimeout: 10000,
  retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 500 },
  sasl: { mechanism: mechanism.toLowerCase(), username, password },
  ssl: process.env.EBB_TLS === '1',  // SASL_SSL: the CA comes from NODE_EXTRA_CA_CERTS
  logLevel: logLevel.NOTHING
})

async function main () {
  const producer = kafka.producer()
  await producer.connect()
  try {
    const [sent] = await producer.send({ topic, messages: [{ value: 'from kafkajs' }] })
    const admin = kafka.admin()
    await admin.connect()
    const cluster = await admin.describeCluster()
    await admin.disconnect()
    return { offset: sent.baseOffset, brokers: cluster.brokers.map(b => `${b.host}:${b.port}`) }
  } finally {
    await producer.disconnect().catch(() => {})
  }
}

main().then(result => {
  console.log(JSON.stringify({ ok: true, ...result }))
}, e => {
  console.log(JSON.stringify({ ok: false, error: { name: e && e.name, type: e && e.type, message: String((e && e.message) || e) } }))
}).finally(() => clearTimeout(watchdog))
