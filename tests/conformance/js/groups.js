#!/usr/bin/env node
// kafkajs consumer groups for tests/conformance/test_groups.py:
//
//   node groups.js <bootstrap> <topic> <group> <records per partition per phase>
//
// Phase 0 is already in the topic. Consumer A joins alone; B joins and they split the topic;
// phase 1 is produced and read; B disconnects (LeaveGroup) and A takes every partition; phase 2 is
// produced and read. Every record is committed right after it is handled (autoCommit off). Then
// the admin flow: listGroups, describeGroups (A still in), fetchOffsets, A leaves, deleteGroups.
// Prints one JSON line: {"ok": true, "result": {...}} or {"ok": false, "error": {...}}.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const WATCHDOG_MS = 70000
const WAIT_MS = 30000
const [bootstrap, topic, groupId, perPhaseArg] = process.argv.slice(2)
const perPhase = Number(perPhaseArg)
const PARTITIONS = 3

const baseConfig = {
  brokers: [bootstrap],
  connectionTimeout: 3000,
  requestTimeout: 30000,
  retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, label, log }) => {
    process.stderr.write(`[${label}] ${namespace}: ${JSON.stringify(log)}\n`)
  }
}
const kafka = new Kafka({ ...baseConfig, clientId: 'ebb-conformance-kafkajs-groups' })

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function waitFor (check, what) {
  const deadline = Date.now() + WAIT_MS
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

function value (phase, partition, i) {
  return `kafkajs-${phase}-${partition}-${i}`
}

async function produce (producer, phase) {
  const messages = []
  for (let p = 0; p < PARTITIONS; p++) {
    for (let i = 0; i < perPhase; i++) messages.push({ partition: p, value: value(phase, p, i) })
  }
  await producer.send({ topic, acks: -1, messages })
}

function member (name, seen, assigned) {
  // kafkajs names the member by the Kafka instance's clientId; a second instance per member gives
  // each its own client id, as two processes would.
  const client = new Kafka({ ...baseConfig, clientId: name })
  const consumer = client.consumer({
    groupId,
    sessionTimeout: 10000,
    rebalanceTimeout: 10000,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 100,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 }
  })
  consumer.on(consumer.events.GROUP_JOIN, event => {
    assigned[name] = (event.payload.memberAssignment[topic] || []).slice().sort()
  })
  return {
    consumer,
    async start () {
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          seen[name].push([partition, Number(message.offset), message.value.toString()])
          await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
        }
      })
    }
  }
}

function isSplit (a, b) {
  if (!a || !b || !a.length || !b.length) return false
  const all = new Set([...a, ...b])
  return all.size === PARTITIONS && a.length + b.length === PARTITIONS
}

async function main () {
  const seen = { a: [], b: [] }
  const assigned = { a: null, b: null }
  const total = () => seen.a.length + seen.b.length
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const a = member('a', seen, assigned)
  const b = member('b', seen, assigned)
  const admin = kafka.admin()
  try {
    await a.start()
    await waitFor(() => assigned.a && assigned.a.length === PARTITIONS, 'A alone holds every partition')
    await b.start()
    await waitFor(() => isSplit(assigned.a, assigned.b), 'A and B split the topic')
    const split = { a: assigned.a, b: assigned.b }
    await produce(producer, 1)
    await waitFor(() => total() >= 2 * PARTITIONS * perPhase, 'phases 0-1 read')
    await b.consumer.disconnect() // LeaveGroup
    await waitFor(() => assigned.a && assigned.a.length === PARTITIONS, 'A takes every partition back')
    const takeover = assigned.a
    await produce(producer, 2)
    await waitFor(() => total() >= 3 * PARTITIONS * perPhase, 'phase 2 read')

    await admin.connect()
    const listed = (await admin.listGroups()).groups
    const described = await admin.describeGroups([groupId])
    const offsets = await admin.fetchOffsets({ groupId, topics: [topic] })
    await a.consumer.disconnect()
    const deleted = await admin.deleteGroups([groupId])
    const listedAfter = (await admin.listGroups()).groups
    for (const group of described.groups) {
      for (const m of group.members) {
        delete m.memberMetadata
        delete m.memberAssignment
      }
    }
    return { seen, split, takeover, listed, described, offsets, deleted, listedAfter }
  } finally {
    await a.consumer.disconnect().catch(() => {})
    await b.consumer.disconnect().catch(() => {})
    await producer.disconnect().catch(() => {})
    await admin.disconnect().catch(() => {})
  }
}

function errorJson (e) {
  return {
    name: e && e.name,
    type: e && e.type,
    message: String((e && e.message) || e),
    stack: String((e && e.stack) || '').split('\n').slice(0, 8).join('\n')
  }
}

const watchdog = setTimeout(() => {
  process.stdout.write(JSON.stringify({ ok: false, error: { name: 'Watchdog', message: `still running after ${WATCHDOG_MS} ms` } }) + '\n')
  process.exit(3)
}, WATCHDOG_MS)

main().then(
  result => ({ ok: true, result }),
  e => ({ ok: false, error: errorJson(e) })
).then(out => {
  clearTimeout(watchdog)
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0))
})
