'use strict'
// Every example of node/examples runs and prints exactly the lines its last comment block
// promises (the `// ...` lines after `main()`).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const dir = path.join(__dirname, '..', '..', 'examples')

for (const name of fs.readdirSync(dir).filter((f) => f.endsWith('.js')).sort()) {
  test(`examples/${name} prints what it promises`, () => {
    const source = fs.readFileSync(path.join(dir, name), 'utf8')
    const tail = source.slice(source.lastIndexOf('\nmain()\n') + '\nmain()\n'.length)
    const expected = tail.split('\n').filter((l) => l.startsWith('// ')).map((l) => l.slice(3))
    assert.ok(expected.length > 0, 'the example ends with the output it promises')
    const stdout = execFileSync(process.execPath, [path.join(dir, name)], { encoding: 'utf8', timeout: 60_000 })
    assert.deepEqual(stdout.trimEnd().split('\n'), expected)
  })
}
