// Drives the Node.js client KafkaJS for tests/clients/test_kafkajs.py.
//
//   node kafkajs.mjs ACTION 'JSON spec'
//
// prints one JSON document on stdout (errors as {"error": message, "type": KafkaJS's error type}).
//   produce  {bootstrap, clientId, topic, messages: [{key, value, partition, headers}], idempotent}
//            -> {records: [{topicName, partition, baseOffset, ...}]}
//   consume  {bootstrap, clientId, group, topics, count} -> {messages: [{topic, partition, offset, key, value, headers}]}
//            (from the earliest offset without a committed one; offsets committed as they are read)
//   admin    {bootstrap, clientId, calls: [[method, options], ...]} -> [{ok: result} | {error, type}]
import kafkajs from 'kafkajs'
import { adminCalls, commandLine, plainer, runAction } from './common.mjs'

const { Kafka, logLevel } = kafkajs
const { action, spec } = commandLine()
const kafka = new Kafka({
  clientId: spec.clientId ?? `kafkajs-${action}`,
  brokers: spec.bootstrap.split(','),
  logLevel: logLevel.NOTHING,
  retry: { retries: 8, initialRetryTime: 100 }
})

function errorOf (error) {
  return { error: error.message, type: error.type ?? error.name ?? null }
}

const plain = plainer({ errorOf })

async function produce () {
  const producer = kafka.producer({ idempotent: spec.idempotent ?? false, allowAutoTopicCreation: false })
  await producer.connect()
  try {
    const records = await producer.send({
      topic: spec.topic,
      acks: -1,
      messages: spec.messages.map(m => ({ key: m.key, value: m.value, partition: m.partition, headers: m.headers }))
    })
    return { records }
  } finally {
    await producer.disconnect()
  }
}

async function consume () {
  const consumer = kafka.consumer({ groupId: spec.group, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 })
  await consumer.connect()
  const out = []
  try {
    for (const topic of spec.topics) await consumer.subscribe({ topic, fromBeginning: true })
    await new Promise((resolve, reject) => {
      consumer.run({
        autoCommit: true,
        autoCommitThreshold: 1,
        eachMessage: async ({ topic, partition, message }) => {
          out.push({
            topic,
            partition,
            offset: message.offset,
            key: message.key?.toString() ?? null,
            value: message.value?.toString() ?? null,
            headers: plain(message.headers ?? {})
          })
          if (out.length >= spec.count) resolve()
        }
      }).catch(reject)
      consumer.on(consumer.events.CRASH, e => reject(e.payload.error))
    })
  } finally {
    await consumer.disconnect()
  }
  return { messages: out }
}

async function admin () {
  const client = kafka.admin()
  await client.connect()
  try {
    return await adminCalls(client, spec.calls, { plain, errorOf })
  } finally {
    await client.disconnect()
  }
}

await runAction({ produce, consume, admin }, action, errorOf)
