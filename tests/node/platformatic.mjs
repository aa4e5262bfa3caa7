// Drives the Node.js client @platformatic/kafka for tests/clients/test_platformatic_kafka.py.
//
//   node platformatic.mjs ACTION 'JSON spec'
//
// prints one JSON document on stdout: what the client answered (bigints as decimal strings, Maps as
// objects, errors as {"error": message, "code": Kafka's error name}).  Actions:
//   produce  {bootstrap, clientId, topic, messages: [{key, value, partition, headers}], idempotent, acks}
//            -> {offsets: [{topic, partition, offset}]}
//   txn      {bootstrap, clientId, transactionalId, topic, messages, commit} -> {offsets, committed}
//   consume  {bootstrap, clientId, group, topics, count, groupProtocol, mode, isolationLevel}
//            -> {messages: [{topic, partition, offset, key, value, headers}]}, each committed
//   admin    {bootstrap, clientId, calls: [[method, options], ...]} -> [{ok: result} | {error, code}]
//            Admin methods by name; in options a string "123n" is the bigint 123.
import { Admin, Consumer, Producer, stringDeserializers, stringSerializers } from '@platformatic/kafka'
import { adminCalls, commandLine, plainer, runAction } from './common.mjs'

const { action, spec } = commandLine()
const bootstrapBrokers = spec.bootstrap.split(',')
const clientId = spec.clientId ?? `platformatic-${action}`
const base = { clientId, bootstrapBrokers, retries: 5, retryDelay: 200, timeout: 15000 }

function bigints (value) {
  if (typeof value === 'string' && /^-?\d+n$/.test(value)) return BigInt(value.slice(0, -1))
  if (Array.isArray(value)) return value.map(bigints)
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, bigints(v)]))
  }
  return value
}

function errorOf (error) {
  // The client wraps broker errors: the Kafka error name is on the error or on one it wraps.
  const codes = []
  const kinds = []
  const walk = e => {
    if (!e || codes.length + kinds.length > 20) return
    if (e.apiId) codes.push(e.apiId)
    if (e.code && typeof e.code === 'string') kinds.push(e.code)
    for (const inner of e.errors ?? []) walk(inner)
    if (e.cause) walk(e.cause)
  }
  walk(error)
  return { error: error.message, code: codes[0] ?? null, codes, kinds }
}

const plain = plainer({ errorOf })

function messagesOf (list) {
  return (list ?? []).map(m => ({ topic: m.topic ?? spec.topic, key: m.key, value: m.value, partition: m.partition, headers: m.headers ? new Map(Object.entries(m.headers)) : undefined }))
}

async function produce () {
  const producer = new Producer({ ...base, serializers: stringSerializers, idempotent: spec.idempotent ?? false, acks: spec.acks ?? -1 })
  try {
    const result = await producer.send({ messages: messagesOf(spec.messages) })
    return { offsets: plain(result.offsets ?? []) }
  } finally {
    await producer.close()
  }
}

async function txn () {
  const producer = new Producer({ ...base, serializers: stringSerializers, idempotent: true, transactionalId: spec.transactionalId })
  try {
    const transaction = await producer.beginTransaction()
    const result = await transaction.send({ messages: messagesOf(spec.messages) })
    if (spec.commit === false) await transaction.abort()
    else await transaction.commit()
    return { offsets: plain(result.offsets ?? []), committed: spec.commit !== false }
  } finally {
    await producer.close()
  }
}

async function consume () {
  const groupOptions = spec.groupProtocol === 'consumer'
    ? { groupProtocol: 'consumer' }
    : { sessionTimeout: 10000, heartbeatInterval: 500, rebalanceTimeout: 10000 }
  const consumer = new Consumer({ ...base, groupId: spec.group, deserializers: stringDeserializers, ...groupOptions })
  const out = []
  try {
    const stream = await consumer.consume({
      topics: spec.topics,
      mode: spec.mode ?? 'committed',
      fallbackMode: 'earliest',
      autocommit: false,
      maxWaitTime: 200,
      isolationLevel: spec.isolationLevel ?? 0
    })
    const want = spec.count
    if (want > 0) {
      for await (const m of stream) {
        out.push({ topic: m.topic, partition: m.partition, offset: m.offset.toString(), key: m.key, value: m.value, headers: plain(m.headers) })
        await m.commit()
        if (out.length >= want) break
      }
    }
    await stream.close()
  } finally {
    await consumer.close(true)
  }
  return { messages: out }
}

async function admin () {
  const client = new Admin(base)
  try {
    return await adminCalls(client, spec.calls, { plain, errorOf, prepare: bigints })
  } finally {
    await client.close()
  }
}

await runAction({ produce, txn, consume, admin }, action, errorOf)
