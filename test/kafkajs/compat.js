'use strict'
// kafkajs client-compatibility check for Weir; run by test/compat_kafkajs_test.go as
//
//   node compat.js <host:port>
//
// It prints "step ..." lines as it goes and exits 0 after "OK", or non-zero with a
// "FAIL: ..." line naming the first mismatch or client error. Steps:
//  1. admin: describeCluster (one broker at the bootstrap address), createTopics (3
//     partitions; a second call reports the topic exists), fetchTopicMetadata.
//  2. produce: a plain producer and an idempotent one (maxInFlightRequests 1), acks -1,
//     100 keyed records each in 10 sends; each send's per-partition baseOffset must equal
//     the number of records already acked in that partition (dense offsets), and
//     fetchTopicOffsets must agree.
//  3. a consumer group reads everything fromBeginning: each partition's offsets 0..n-1 in
//     order, each with the value the producer was acked for.
//  4. group "kafkajs-group": run 1 reads all records with autoCommit and the committed
//     offsets (admin.fetchOffsets) equal the high watermarks; after 30 more records, run 2
//     (autoCommit off, consumer.commitOffsets) reads exactly those 30 and nothing older,
//     and commits them.

const { Kafka, logLevel, Partitioners } = require('kafkajs')

const bootstrap = process.argv[2]
if (!bootstrap) {
  console.error('usage: node compat.js <host:port>')
  process.exit(2)
}
const P = 3
const topic = 'kafkajs-topic'
const t0 = Date.now()
const step = (s) => console.log(`step ${s} at ${Date.now() - t0} ms`)

class Mismatch extends Error {}
const fail = (msg) => { throw new Mismatch(msg) }
const check = (cond, msg) => { if (!cond) fail(msg) }

const kafka = new Kafka({
  clientId: 'weir-compat-kafkajs',
  brokers: [bootstrap],
  logLevel: logLevel.INFO,
  connectionTimeout: 10000,
  requestTimeout: 30000,
  retry: { retries: 5, initialRetryTime: 100 },
})

// expected[p][offset] = value acked there
const expected = Array.from({ length: P }, () => [])

function withTimeout (promise, ms, what) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Mismatch(`${what}: timed out after ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

async function produce (producer, name, prefix, n, partitionMetadata, into) {
  const partitioner = Partitioners.DefaultPartitioner()
  const perSend = 10
  for (let s = 0; s < n / perSend; s++) {
    const messages = []
    const byPartition = new Map()
    for (let i = s * perSend; i < (s + 1) * perSend; i++) {
      const m = { key: `k${i}`, value: `${prefix}-${String(i).padStart(3, '0')}` }
      const p = partitioner({ topic, partitionMetadata, message: m })
      if (!byPartition.has(p)) byPartition.set(p, [])
      byPartition.get(p).push(m.value)
      messages.push(m)
    }
    const meta = await producer.send({ topic, acks: -1, messages })
    check(meta.length === byPartition.size,
      `${name}: send ${s} acked ${meta.length} partitions (${JSON.stringify(meta)}), want ${byPartition.size}`)
    for (const r of meta) {
      check(r.errorCode === 0, `${name}: send ${s} partition ${r.partition} error code ${r.errorCode}`)
      const vals = byPartition.get(r.partition)
      check(vals !== undefined, `${name}: send ${s} acked partition ${r.partition}, where the default partitioner put none of its records`)
      const base = Number(r.baseOffset)
      check(base === into[r.partition].length,
        `${name}: send ${s} partition ${r.partition} baseOffset ${r.baseOffset}, want ${into[r.partition].length} (offsets not dense)`)
      into[r.partition].push(...vals)
    }
  }
}

// consume runs a group consumer until want records arrived; onMessage may throw to fail.
async function consume (groupId, want, opts, onMessage) {
  const consumer = kafka.consumer({
    groupId,
    sessionTimeout: 30000,
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 250,
    retry: { retries: 5, initialRetryTime: 100 },
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  let n = 0
  let settle
  const done = new Promise((resolve, reject) => { settle = { resolve, reject } })
  // A crash kafkajs restarts from (restart: true) before any record was read is what a
  // kafkajs application sees when the group's coordinator is still loading its partition
  // (JoinGroup answered COORDINATOR_LOAD_IN_PROGRESS on a just-created __consumer_offsets):
  // logged, not a failure. Any other crash fails the step.
  const crash = consumer.on(consumer.events.CRASH, (e) => {
    const err = e.payload.error
    if (e.payload.restart && n === 0 && err && err.retriable) {
      console.log(`note: group ${groupId}: consumer restarted by kafkajs after a retriable error: ${err.type || err.message}`)
      return
    }
    settle.reject(new Error(`consumer crashed: ${err && err.stack}`))
  })
  const got = Array.from({ length: P }, () => [])
  await consumer.run({
    autoCommit: opts.autoCommit,
    eachMessage: async ({ partition, message }) => {
      try {
        const off = Number(message.offset)
        const val = message.value.toString()
        onMessage(partition, off, val)
        got[partition].push({ off, val })
        n++
        if (n >= want) settle.resolve()
      } catch (e) {
        settle.reject(e)
      }
    },
  })
  try {
    await withTimeout(done, 25000, `group ${groupId}: ${n} of ${want} records`)
    if (opts.commit) {
      const offsets = []
      got.forEach((ms, p) => {
        if (ms.length) offsets.push({ topic, partition: p, offset: String(ms[ms.length - 1].off + 1) })
      })
      await consumer.commitOffsets(offsets)
    }
  } finally {
    crash()
    await consumer.disconnect()
  }
  check(n === want, `group ${groupId}: read ${n} records, want ${want}`)
  return got
}

async function checkCommitted (admin, groupId, hwm) {
  const res = await admin.fetchOffsets({ groupId, topics: [topic] })
  const parts = res.find((t) => t.topic === topic).partitions
  for (let p = 0; p < P; p++) {
    const e = parts.find((x) => x.partition === p)
    check(e && Number(e.offset) === hwm[p],
      `group ${groupId}: committed offset of partition ${p} is ${e && e.offset}, want ${hwm[p]}`)
  }
}

async function main () {
  // 1. Admin.
  const admin = kafka.admin()
  await admin.connect()
  const cluster = await admin.describeCluster()
  check(cluster.brokers.length === 1 && `${cluster.brokers[0].host}:${cluster.brokers[0].port}` === bootstrap,
    `describeCluster brokers ${JSON.stringify(cluster.brokers)}, want one at ${bootstrap}`)
  check(cluster.controller === cluster.brokers[0].nodeId, `describeCluster controller ${cluster.controller}, want ${cluster.brokers[0].nodeId}`)
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: P, replicationFactor: 1 }], waitForLeaders: true })
  check(created === true, `createTopics returned ${created}, want true`)
  const again = await admin.createTopics({ topics: [{ topic, numPartitions: P, replicationFactor: 1 }] })
  check(again === false, `second createTopics returned ${again}, want false (topic exists)`)
  check((await admin.listTopics()).includes(topic), 'listTopics does not list the topic')
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  const partitionMetadata = md.topics[0].partitions
  check(partitionMetadata.length === P, `fetchTopicMetadata: ${partitionMetadata.length} partitions, want ${P}`)
  for (const pm of partitionMetadata) {
    check(pm.partitionErrorCode === 0 && pm.leader === cluster.brokers[0].nodeId,
      `fetchTopicMetadata partition ${JSON.stringify(pm)}: want leader ${cluster.brokers[0].nodeId}, no error`)
  }
  step('admin')

  // 2. Produce: acks=all, plain then idempotent.
  for (const [name, opts] of [['plain', {}], ['idempotent', { idempotent: true, maxInFlightRequests: 1 }]]) {
    const producer = kafka.producer({ ...opts, allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner })
    await producer.connect()
    await produce(producer, name, name, 100, partitionMetadata, expected)
    await producer.disconnect()
  }
  const total = expected.reduce((a, e) => a + e.length, 0)
  check(total === 200, `acked ${total} records, want 200`)
  const offs = await admin.fetchTopicOffsets(topic)
  for (const o of offs) {
    check(Number(o.high) === expected[o.partition].length && Number(o.low) === 0,
      `fetchTopicOffsets partition ${o.partition}: low ${o.low} high ${o.high}, want 0 and ${expected[o.partition].length}`)
  }
  step('produce')

  // 3. Read everything from the beginning.
  const next = Array(P).fill(0)
  await consume('kafkajs-reader', total, { autoCommit: true }, (p, off, val) => {
    check(off === next[p] && val === expected[p][off],
      `reader: partition ${p} record ${next[p]} is offset ${off} ${JSON.stringify(val)}, want offset ${next[p]} ${JSON.stringify(expected[p][next[p]])}`)
    next[p]++
  })
  step('consume from beginning')

  // 4. Group: commit, then resume after the committed offsets.
  const groupId = 'kafkajs-group'
  next.fill(0)
  await consume(groupId, total, { autoCommit: true }, (p, off, val) => {
    check(off === next[p] && val === expected[p][off],
      `group run 1: partition ${p} record ${next[p]} is offset ${off} ${JSON.stringify(val)}, want offset ${next[p]} ${JSON.stringify(expected[p][next[p]])}`)
    next[p]++
  })
  const hwm = expected.map((e) => e.length)
  await checkCommitted(admin, groupId, hwm)
  step('group run 1 (autoCommit)')

  const producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner })
  await producer.connect()
  await produce(producer, 'more', 'more', 30, partitionMetadata, expected)
  await producer.disconnect()
  await consume(groupId, 30, { autoCommit: false, commit: true }, (p, off, val) => {
    check(off >= hwm[p] && val.startsWith('more-'),
      `group run 2: read partition ${p} offset ${off} ${JSON.stringify(val)} but the committed offset was ${hwm[p]}: it did not resume after the commit`)
    check(val === expected[p][off], `group run 2: partition ${p} offset ${off} is ${JSON.stringify(val)}, want ${JSON.stringify(expected[p][off])}`)
  })
  await checkCommitted(admin, groupId, expected.map((e) => e.length))
  step('group run 2 (commitOffsets)')

  // Transactions: kafkajs's transactional producer; its consumers read committed data
  // by default (readUncommitted: false), so the aborted record must never show.
  const txTopic = 'kafkajs-tx'
  check(await admin.createTopics({ topics: [{ topic: txTopic, numPartitions: 1 }] }) === true, 'createTopics kafkajs-tx')
  const txp = kafka.producer({ transactionalId: 'kafkajs-tx', idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner })
  await txp.connect()
  for (const [values, commit] of [[['c-0', 'c-1'], true], [['a-0'], false], [['c-2'], true]]) {
    const tx = await txp.transaction()
    await tx.send({ topic: txTopic, messages: values.map((value) => ({ value })) })
    await (commit ? tx.commit() : tx.abort())
  }
  await txp.disconnect()
  const got = []
  const reader = kafka.consumer({ groupId: 'kafkajs-tx-reader' })
  await reader.connect()
  await reader.subscribe({ topic: txTopic, fromBeginning: true })
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`transactions: read ${JSON.stringify(got)} within 30 s`)), 30000)
    reader.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString())
        if (got.length >= 3) { clearTimeout(timer); resolve() }
      }
    })
  })
  await reader.disconnect()
  check(JSON.stringify(got) === JSON.stringify(['c-0', 'c-1', 'c-2']), `transactions: read_committed read ${JSON.stringify(got)}, want c-0 c-1 c-2 (a-0 was aborted)`)
  step('transactions (commit, abort, read_committed)')
  await admin.disconnect()
}

main().then(() => {
  console.log(`OK kafkajs ${require('kafkajs/package.json').version} in ${Date.now() - t0} ms`)
  process.exit(0)
}, (e) => {
  console.log(`FAIL: ${e instanceof Mismatch ? e.message : (e && e.stack) || e}`)
  if (e && e.name && !(e instanceof Mismatch)) console.log(`FAIL detail: ${JSON.stringify(e, Object.getOwnPropertyNames(e))}`)
  process.exit(1)
})
