// negclient.mjs runs the NIP-77 negentropy client of the nostr-tools npm
// package for grasp-sync's interop test (interop_test.go). It reads one JSON
// command per line on stdin and writes one JSON answer per line on stdout:
//
//   {"op":"client","items":[[created_at,"hexid"],...],"frameLimit":N}
//       -> {"msg":"<initial message>"}           (frameLimit 0 = unlimited)
//   {"op":"reply","msg":"<hex from the server>"}
//       -> {"msg":"<next message>"} or {"done":true,"have":[...],"need":[...]}
//   {"op":"fingerprint","items":[[created_at,"hexid"],...]}
//       -> {"fingerprint":"<hex fingerprint of the whole set>"}
//
// Errors are answered as {"error":"..."}.
import { createInterface } from 'node:readline'
import { nip77 } from 'nostr-tools'

const { Negentropy, NegentropyStorageVector } = nip77

function storageOf(items) {
  const s = new NegentropyStorageVector()
  for (const [ts, id] of items) s.insert(ts, id)
  s.seal()
  return s
}

const hex = (bytes) => Buffer.from(bytes).toString('hex')

let neg = null
let have = []
let need = []

function handle(cmd) {
  switch (cmd.op) {
    case 'client': {
      neg = new Negentropy(storageOf(cmd.items), cmd.frameLimit === 0 ? Infinity : cmd.frameLimit)
      have = []
      need = []
      return { msg: neg.initiate() }
    }
    case 'reply': {
      const out = neg.reconcile(
        cmd.msg,
        (id) => have.push(id),
        (id) => need.push(id),
      )
      if (out === null) return { done: true, have, need }
      return { msg: out }
    }
    case 'fingerprint': {
      const s = storageOf(cmd.items)
      return { fingerprint: hex(s.fingerprint(0, s.size())) }
    }
    default:
      throw new Error(`unknown op ${cmd.op}`)
  }
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity })
for await (const line of rl) {
  if (line.trim() === '') continue
  let answer
  try {
    answer = handle(JSON.parse(line))
  } catch (e) {
    answer = { error: String(e && e.stack ? e.stack : e) }
  }
  process.stdout.write(JSON.stringify(answer) + '\n')
}
