'use strict'
// kafkajs through partition moves, with docs/CLIENTS.md's kafkajs settings; run by
// cluster/TestKafkajsProducesThroughMoves as
//
//   node moves.js <host:port,...> <topic>
//
// An idempotent producer sends one record at a time to partition 0 of topic and prints
// "ack <n> <offset> <ms>" for each ack (n counts acks from 1, ms is how long the send
// took). The test moves the partition meanwhile and writes a line to stdin when done;
// the script then stops, prints "OK <acks>" and exits 0. Any failed send prints
// "FAIL: ..." and exits 1: kafkajs gave up on a refusal it should have retried.

const { Kafka, logLevel } = require('kafkajs')

const [brokers, topic] = process.argv.slice(2)
if (!brokers || !topic) {
  console.error('usage: node moves.js <host:port,...> <topic>')
  process.exit(2)
}

const kafka = new Kafka({
  clientId: 'weir-moves-kafkajs',
  brokers: brokers.split(','),
  logLevel: logLevel.WARN,
  // docs/CLIENTS.md, kafkajs.
  requestTimeout: 5000,
  retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 10 },
})

let stop = false
process.stdin.on('data', () => { stop = true })
process.stdin.on('end', () => { stop = true })

async function main () {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  let acks = 0
  while (!stop) {
    const start = Date.now()
    const [res] = await producer.send({ topic, acks: -1, messages: [{ partition: 0, value: `r-${acks}` }] })
    acks++
    console.log(`ack ${acks} ${res.baseOffset} ${Date.now() - start}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  await producer.disconnect()
  console.log(`OK ${acks}`)
}

main().then(() => process.exit(0), (e) => {
  console.log(`FAIL: ${e.name}: ${e.message}`)
  process.exit(1)
})
