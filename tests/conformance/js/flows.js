#!/usr/bin/env node
// kafkajs side of the conformance suite; tests/conformance/test_kafkajs.py drives it.
//
//   node flows.js <flow> <bootstrap> <topic> [args...]      (produce reads its records from stdin)
//
// Prints one JSON line on stdout: {"ok": true, "result": ...} or {"ok": false, "error": {...}}.
// kafkajs logs go to stderr. A watchdog ends the process if a flow hangs.
'use strict'

const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs')

const WATCHDOG_MS = 25000
const REQUEST_TIMEOUT_MS = 10000

const [flowName, bootstrap, topic, ...args] = process.argv.slice(2)

const kafka = new Kafka({
  clientId: 'ebb-conformance-kafkajs',
  brokers: [bootstrap],
  connectionTimeout: 3000,
  requestTimeout: REQUEST_TIMEOUT_MS,
  retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, level, label, log }) => {
    process.stderr.write(`[${label}] ${namespace}: ${JSON.stringify(log)}\n`)
  }
})

function errorJson (e) {
  return {
    name: e && e.name,
    type: e && e.type,
    code: e && e.code,
    message: String((e && e.message) || e),
    retriable: e && e.retriable,
    stack: String((e && e.stack) || '').split('\n').slice(0, 6).join('\n')
  }
}

async function withAdmin (fn) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect().catch(() => {})
  }
}

function readStdin () {
  return new Promise((resolve, reject) => {
    let data = ''
    process.stdin.setEncoding('utf8')
    process.stdin.on('data', chunk => { data += chunk })
    process.stdin.on('end', () => resolve(data))
    process.stdin.on('error', reject)
  })
}

// The cluster object kafkajs builds for its own consumers (same connection, metadata and
// Fetch code), reached through the Kafka instance's private factory. kafkajs has no public
// assign(): its consumers always join a group, and groups are not part of this suite.
function consumerCluster () {
  const create = Object.getOwnPropertySymbols(kafka).find(s => String(s) === 'Symbol(private:Kafka:createCluster)')
  if (!create) throw new Error('kafkajs internals changed: no private createCluster')
  return kafka[create]({ metadataMaxAge: 300000, allowAutoTopicCreation: false, isolationLevel: 1 })
}

const flows = {
  async create ([partitions]) {
    return withAdmin(async admin => {
      const created = await admin.createTopics({
        topics: [{ topic, numPartitions: Number(partitions), replicationFactor: 1 }],
        waitForLeaders: true,
        timeout: REQUEST_TIMEOUT_MS
      })
      const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
      return { created, partitions: metadata.topics[0].partitions.map(p => p.partitionId).sort() }
    })
  },

  // stdin: [{partition, key, value, timestamp}] -> one send() (one batch per partition)
  async produce ([acks]) {
    const records = JSON.parse(await readStdin())
    const producer = kafka.producer({ allowAutoTopicCreation: false })
    await producer.connect()
    try {
      return await producer.send({
        topic,
        acks: Number(acks),
        timeout: REQUEST_TIMEOUT_MS,
        messages: records.map(r => ({
          partition: r.partition,
          key: r.key,
          value: r.value,
          timestamp: String(r.timestamp)
        }))
      })
    } finally {
      await producer.disconnect().catch(() => {})
    }
  },

  // args: JSON {partition: fetchOffset}, wanted record count. Fetches from each partition's
  // leader until `count` records arrived or every partition is at its high watermark.
  // A partition error (e.g. OFFSET_OUT_OF_RANGE) is thrown as kafkajs raises it.
  async fetch ([startJson, count]) {
    const want = Number(count)
    const next = Object.fromEntries(Object.entries(JSON.parse(startJson)).map(([p, o]) => [Number(p), String(o)]))
    const cluster = consumerCluster()
    await cluster.connect()
    try {
      await cluster.addTargetTopic(topic)
      await cluster.refreshMetadata()
      const leaders = Object.fromEntries(cluster.findTopicPartitionMetadata(topic).map(p => [p.partitionId, p.leader]))
      const records = []
      const done = new Set()
      const deadline = Date.now() + 15000
      while (records.length < want && done.size < Object.keys(next).length && Date.now() < deadline) {
        for (const partition of Object.keys(next).map(Number)) {
          if (done.has(partition)) continue
          const broker = await cluster.findBroker({ nodeId: leaders[partition] })
          const response = await broker.fetch({
            replicaId: -1,
            isolationLevel: 1,
            maxWaitTime: 100,
            minBytes: 1,
            maxBytes: 10485760,
            topics: [{ topic, partitions: [{ partition, fetchOffset: next[partition], maxBytes: 1048576 }] }]
          })
          for (const { partitions } of response.responses) {
            for (const p of partitions) {
              for (const m of p.messages) {
                if (BigInt(m.offset) < BigInt(next[p.partition])) continue
                records.push({
                  partition: p.partition,
                  offset: Number(m.offset),
                  key: m.key === null ? null : m.key.toString(),
                  value: m.value === null ? null : m.value.toString(),
                  timestamp: Number(m.timestamp)
                })
                next[p.partition] = (BigInt(m.offset) + 1n).toString()
              }
              if (BigInt(next[p.partition]) >= BigInt(p.highWatermark)) done.add(p.partition)
            }
          }
        }
      }
      return records
    } finally {
      await cluster.disconnect().catch(() => {})
    }
  },

  async offsets () {
    return withAdmin(admin => admin.fetchTopicOffsets(topic))
  },

  async 'offsets-by-time' ([timestamp]) {
    return withAdmin(admin => admin.fetchTopicOffsetsByTimestamp(topic, Number(timestamp)))
  },

  async 'delete-records' ([partition, offset]) {
    return withAdmin(async admin => {
      // kafkajs needs the topic's metadata loaded first ("Topic metadata not loaded").
      await admin.fetchTopicMetadata({ topics: [topic] })
      await admin.deleteTopicRecords({ topic, partitions: [{ partition: Number(partition), offset: String(offset) }] })
      return admin.fetchTopicOffsets(topic)
    })
  },

  async 'describe-configs' () {
    return withAdmin(admin => admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }]
    }))
  },

  async 'alter-configs' ([name, value]) {
    return withAdmin(admin => admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name, value }] }]
    }))
  },

  async 'delete-topic' () {
    return withAdmin(async admin => {
      await admin.deleteTopics({ topics: [topic], timeout: REQUEST_TIMEOUT_MS })
      return admin.listTopics()
    })
  }
}

async function main () {
  const watchdog = setTimeout(() => {
    process.stdout.write(JSON.stringify({ ok: false, error: { name: 'Watchdog', message: `${flowName} still running after ${WATCHDOG_MS} ms` } }) + '\n')
    process.exit(3)
  }, WATCHDOG_MS)
  const flow = flows[flowName]
  if (!flow || !bootstrap || !topic) {
    process.stderr.write(`usage: flows.js <${Object.keys(flows).join('|')}> <bootstrap> <topic> [args...]\n`)
    process.exit(2)
  }
  let out
  try {
    out = { ok: true, result: await flow(args) }
  } catch (e) {
    out = { ok: false, error: errorJson(e) }
  }
  clearTimeout(watchdog)
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0))
}

main()
