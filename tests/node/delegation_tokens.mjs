// Drives @platformatic/kafka's delegation token APIs (CreateDelegationToken v3, RenewDelegationToken v2,
// ExpireDelegationToken v2, DescribeDelegationToken v3) for tests/clients/test_delegation_tokens_clients.py.
//
//   node delegation_tokens.mjs sessions '{"clientId", "sessions": [{host, port, sasl?: {mechanism, username,
//                                         password}, calls: [[name, ...args], ...]}, ...]}'
//
// runs the sessions in order, each on its own connection (SASL/SCRAM when "sasl" is given), each call in
// order, and prints one JSON array per session of {ok: response} or {error: message, errorCode: Kafka's
// code}.  Calls:
//   ["create", ownerType|null, ownerName|null, [[type, name], ...renewers], maxLifetimeMs]
//   ["renew", hmacBase64, renewPeriodMs]   ["expire", hmacBase64, expiryTimePeriodMs]
//   ["describe", [[type, name], ...] | null]
// An argument {"ref": [session, call, field]} is that field of an earlier call's answer (a token's HMAC).
// Bigints print as decimal strings, buffers (HMACs) as Base64.
import {
  Connection, createDelegationTokenV3, describeDelegationTokenV3, expireDelegationTokenV2, renewDelegationTokenV2
} from '@platformatic/kafka'
import { commandLine, plainer, runAction } from './common.mjs'

const { action, spec } = commandLine()

function errorOf (error) {
  return { error: error.message, errorCode: error.response?.errorCode ?? null }
}

const plain = plainer({ buffers: 'base64', errorOf })

function principals (list) {
  return list === null ? null : list.map(([principalType, principalName]) => ({ principalType, principalName }))
}

function resolve (arg, done) {
  if (arg && typeof arg === 'object' && !Array.isArray(arg) && arg.ref) {
    const [session, index, field] = arg.ref
    return done[session][index].ok[field]
  }
  return arg
}

async function call (connection, [name, ...args]) {
  switch (name) {
    case 'create': {
      const [ownerType, ownerName, renewers, maxLifetimeMs] = args
      return createDelegationTokenV3.api.async(connection, ownerType, ownerName, principals(renewers),
        BigInt(maxLifetimeMs))
    }
    case 'renew':
      return renewDelegationTokenV2.api.async(connection, Buffer.from(args[0], 'base64'), BigInt(args[1]))
    case 'expire':
      return expireDelegationTokenV2.api.async(connection, Buffer.from(args[0], 'base64'), BigInt(args[1]))
    case 'describe':
      return describeDelegationTokenV3.api.async(connection, principals(args[0]))
    default:
      throw new Error(`unknown call ${name}`)
  }
}

async function session ({ host, port, sasl, calls }, done) {
  const connection = new Connection(spec.clientId ?? 'plt-tokens', { sasl, requestTimeout: 15000 })
  await connection.connect(host, port)
  const results = []
  try {
    for (const [name, ...args] of calls) {
      try {
        results.push({ ok: plain(await call(connection, [name, ...args.map(a => resolve(a, done))])) })
      } catch (error) {
        results.push(errorOf(error))
      }
    }
  } finally {
    await connection.close()
  }
  return results
}

async function sessions () {
  const done = []
  for (const s of spec.sessions) done.push(await session(s, done))
  return done
}

await runAction({ sessions }, action, errorOf)
