'use strict'
// The npm packages, installed into a fresh project: the addon comes from the platform package,
// the main package has no addon and no install script, and one guarded call works.
// usage (in the project): node smoke.js VERSION PLATFORM
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

async function main() {
  const [version, platform] = process.argv.slice(2)
  const ab = require('agentbreaker')
  const main = path.dirname(require.resolve('agentbreaker/package.json'))
  const manifest = JSON.parse(fs.readFileSync(path.join(main, 'package.json'), 'utf8'))
  assert.equal(manifest.version, version)
  assert.equal(manifest.scripts, undefined, 'the published package has no scripts')
  assert.deepEqual(fs.readdirSync(main).filter((f) => f.endsWith('.node')), [])
  const addonPackage = `agentbreaker-${platform}`
  const addon = require.resolve(addonPackage)
  assert.equal(require(`${addonPackage}/package.json`).version, version)
  assert.ok(addon.endsWith(`agentbreaker.${platform}.node`), addon)

  const breaker = new ab.FailureBreaker({ failureThreshold: 3 })
  let calls = 0
  const search = async () => {
    calls += 1
    throw new Error('search backend timed out')
  }
  const outcomes = []
  for (let i = 0; i < 4; i++) {
    try {
      await breaker.call(search)
    } catch (error) {
      outcomes.push(error.code === 'CIRCUIT_OPEN' ? 'refused' : 'failed')
    }
  }
  assert.deepEqual(outcomes, ['failed', 'failed', 'failed', 'refused'])
  assert.equal(calls, 3, 'the refused call must not run')
  console.log(`node: agentbreaker ${manifest.version}, addon from ${addonPackage}; ` +
    `guarded call: 3 failures, then CIRCUIT_OPEN (${breaker.getStatus().state})`)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
