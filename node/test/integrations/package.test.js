'use strict'
// The package around the adapters: `exports` with types for every subpath, the frameworks as
// optional peers (installing agentbreaker pulls none), `require('agentbreaker')` loading none of
// them, and a subpath whose framework is missing naming the package to install.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')

const root = path.join(__dirname, '..', '..')
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))

/** subpath -> the packages it needs (the first is the one to install). */
const SUBPATHS = {
  './ai': ['ai'],
  './openai-agents': ['@openai/agents'],
  './langchain': ['langchain', '@langchain/core'],
  './claude-agent-sdk': ['@anthropic-ai/claude-agent-sdk'],
  './otel': ['@opentelemetry/api'],
}
const FRAMEWORK_DIRS = ['ai', '@ai-sdk', '@openai', 'openai', 'langchain', '@langchain', '@anthropic-ai', '@opentelemetry', 'zod']

function node(args, options = {}) {
  return spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8', timeout: 60_000, ...options })
}

test('exports: "." as main/types, every adapter subpath with its types, ./package.json', () => {
  assert.deepEqual(pkg.exports['.'], { types: './index.d.ts', default: './agentbreaker.js' })
  assert.equal(pkg.main, 'agentbreaker.js')
  assert.equal(pkg.exports['./package.json'], './package.json')
  for (const subpath of Object.keys(SUBPATHS)) {
    const entry = pkg.exports[subpath]
    assert.ok(entry, subpath)
    assert.deepEqual(Object.keys(entry), ['types', 'default'], `${subpath}: types first`)
    for (const file of Object.values(entry)) assert.ok(fs.existsSync(path.join(root, file)), file)
  }
  assert.deepEqual(Object.keys(pkg.exports).sort(), ['.', './package.json', ...Object.keys(SUBPATHS)].sort())
})

test('the frameworks are optional peer dependencies, pinned dev dependencies; no runtime dependency', () => {
  assert.equal(pkg.dependencies, undefined)
  const peers = [...new Set(Object.values(SUBPATHS).flat())].sort()
  assert.deepEqual(Object.keys(pkg.peerDependencies).sort(), peers)
  for (const peer of peers) {
    assert.deepEqual(pkg.peerDependenciesMeta[peer], { optional: true }, peer)
    assert.match(pkg.devDependencies[peer], /^\d+\.\d+\.\d+$/, `${peer} is pinned in devDependencies`)
  }
  const lock = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8'))
  for (const peer of peers) {
    const entry = lock.packages[`node_modules/${peer}`]
    assert.equal(entry.version, pkg.devDependencies[peer], peer)
    assert.equal(entry.dev, true, `${peer} is a dev dependency in the lock`)
  }
})

test("require('agentbreaker') loads no framework; each subpath loads only its own", () => {
  const loaded = (request) => {
    const script = `require(${JSON.stringify(request)}); console.log(JSON.stringify(Object.keys(require.cache)))`
    const out = node(['-e', script])
    assert.equal(out.status, 0, out.stderr)
    return JSON.parse(out.stdout)
      .map((file) => file.split(`${path.sep}node_modules${path.sep}`)[1])
      .filter(Boolean)
      .map((rest) => rest.split(path.sep).slice(0, rest.startsWith('@') ? 2 : 1).join('/'))
  }
  const frameworks = (mods) => [...new Set(mods.filter((m) => FRAMEWORK_DIRS.includes(m.split('/')[0])))].sort()
  assert.deepEqual(frameworks(loaded('agentbreaker')), [])
  // the adapters that only read what the framework hands them load nothing of it
  for (const subpath of ['./ai', './openai-agents', './claude-agent-sdk']) {
    assert.deepEqual(frameworks(loaded(`agentbreaker/${subpath.slice(2)}`)), [], subpath)
  }
  assert.ok(frameworks(loaded('agentbreaker/langchain')).includes('langchain'))
  assert.deepEqual(frameworks(loaded('agentbreaker/otel')), ['@opentelemetry/api'])
})

test('a subpath whose framework is missing throws an error naming the package to install', () => {
  // test/support/hide-packages.js makes Node's resolver fail for the packages in HIDE_PACKAGES
  const hide = path.join(__dirname, '..', 'support', 'hide-packages.js')
  for (const [subpath, packages] of Object.entries(SUBPATHS)) {
    const request = `agentbreaker/${subpath.slice(2)}`
    const script = `try { require(${JSON.stringify(request)}); console.log('loaded') } catch (e) { console.log(e.code + '|' + e.message) }`
    const out = node(['--require', hide, '-e', script], { env: { ...process.env, HIDE_PACKAGES: packages.join(',') } })
    assert.equal(out.status, 0, out.stderr)
    const [code, message] = out.stdout.trim().split('|')
    assert.equal(code, 'MODULE_NOT_FOUND', out.stdout)
    assert.ok(message.startsWith(`${request} needs `), message)
    assert.ok(message.includes(`npm install ${packages[0]}`), message)
    // and the root package still loads without it
    const rootOut = node(['--require', hide, '-e', "require('agentbreaker'); console.log('ok')"], { env: { ...process.env, HIDE_PACKAGES: packages.join(',') } })
    assert.equal(rootOut.stdout.trim(), 'ok', rootOut.stderr)
  }
  const out = node(['--require', hide, '-e', "try { require('agentbreaker/langchain') } catch (e) { console.log(e.message) }"], {
    env: { ...process.env, HIDE_PACKAGES: '@langchain/core' },
  })
  assert.match(out.stdout, /^agentbreaker\/langchain needs LangChain v1 \(langchain and @langchain\/core\): npm install @langchain\/core/)
})

test('ES modules import the subpaths by name', () => {
  const script = [
    "import { agentBreaker } from 'agentbreaker/ai'",
    "import { agentBreaker as oa } from 'agentbreaker/openai-agents'",
    "import { agentBreakerMiddleware } from 'agentbreaker/langchain'",
    "import { hooks, trackSpend } from 'agentbreaker/claude-agent-sdk'",
    "import { instrument } from 'agentbreaker/otel'",
    "import { Monitor } from 'agentbreaker'",
    'console.log([agentBreaker, oa, agentBreakerMiddleware, hooks, trackSpend, instrument, Monitor].map((f) => typeof f).join(","))',
  ].join('\n')
  const out = node(['--input-type=module', '-e', script])
  assert.equal(out.status, 0, out.stderr)
  assert.equal(out.stdout.trim(), Array(7).fill('function').join(','))
})

test('npm pack ships the adapters and their types, not the tests or examples', () => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8' })
  const files = JSON.parse(out)[0].files.map((f) => f.path)
  for (const subpath of Object.keys(SUBPATHS)) {
    for (const file of Object.values(pkg.exports[subpath])) assert.ok(files.includes(file.slice(2)), file)
  }
  assert.ok(files.includes('integrations/_common.js'))
  assert.ok(!files.some((f) => f.startsWith('test/') || f.startsWith('examples/')), files.join(' '))
})
