// What the scripts that drive the Node.js clients for the tests share (tests/clients/node_clients.py runs them):
// each is run as `node SCRIPT ACTION 'JSON spec'` and prints one JSON document on stdout.

// The action and the spec from the command line.
export function commandLine () {
  const [action, specText] = process.argv.slice(2)
  return { action, spec: JSON.parse(specText ?? '{}') }
}

// A function turning a client's answer into what JSON can hold: bigints as decimal strings, Maps as objects,
// Sets as arrays, buffers as text in the `buffers` encoding, errors as `errorOf` describes them.
export function plainer ({ buffers = 'utf8', errorOf }) {
  const plain = value => {
    if (typeof value === 'bigint') return value.toString()
    if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [String(k), plain(v)]))
    if (value instanceof Set) return [...value].map(plain)
    if (Buffer.isBuffer(value)) return value.toString(buffers)
    if (Array.isArray(value)) return value.map(plain)
    if (value instanceof Error) return errorOf(value)
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]))
    }
    return value
  }
  return plain
}

// Each [method, options] call on an admin client in order: [{ok: plain answer} | errorOf(error)].
export async function adminCalls (client, calls, { plain, errorOf, prepare = options => options }) {
  const results = []
  for (const [method, options] of calls) {
    try {
      results.push({ ok: plain(await client[method](prepare(options))) ?? null })
    } catch (error) {
      results.push(errorOf(error))
    }
  }
  return results
}

// Runs actions[action] and prints its answer; on an error prints errorOf(error) and exits with code 2.
export async function runAction (actions, action, errorOf) {
  try {
    if (!Object.hasOwn(actions, action)) throw new Error(`unknown action ${action}`)
    const result = await actions[action]()
    process.stdout.write(JSON.stringify(result) + '\n')
  } catch (error) {
    process.stdout.write(JSON.stringify(errorOf(error)) + '\n')
    process.exitCode = 2
  }
}
