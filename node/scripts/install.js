'use strict'
// `npm install` in this folder builds the addon: the napi CLI (a devDependency) is installed by
// then, and this runs `npm run build`. Where the package is installed from the folder into
// another project, the CLI may be missing; an addon built before is then used as it is.

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const root = path.join(__dirname, '..')
let cli = null
try {
  cli = require.resolve('@napi-rs/cli/package.json', { paths: [root] })
} catch {
  cli = null
}
if (cli === null) {
  if (fs.readdirSync(root).some((name) => name.endsWith('.node'))) {
    console.log('agentbreaker: using the addon built before (the napi CLI is not installed here)')
    process.exit(0)
  }
  console.error('agentbreaker: no addon built yet; run `npm install` in the agentbreaker node/ folder first')
  process.exit(1)
}
const npm = process.env.npm_execpath
const result = npm
  ? spawnSync(process.execPath, [npm, 'run', 'build'], { cwd: root, stdio: 'inherit' })
  : spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' })
process.exit(result.status === null ? 1 : result.status)
