'use strict'
// agentbreaker/claude-agent-sdk with the Claude Agent SDK: Claude runs the same failing command
// again and again; the hooks nudge it, then deny the call and stop the session. So that this runs
// offline, the SDK spawns a stand-in for the `claude` CLI (test/support/fake-claude.mjs) that
// plays a stuck session; leave `pathToClaudeCodeExecutable` out to use the real Claude Code.
//
//   node examples/claude-agent-sdk.js

const path = require('node:path')
const { query } = require('@anthropic-ai/claude-agent-sdk')
const { Monitor } = require('agentbreaker')
const { hooks, trackSpend } = require('agentbreaker/claude-agent-sdk')

async function main() {
  const monitor = new Monitor({ budget: { maxTokenSpendCentsPerTask: 500 } })
  const q = query({
    prompt: 'Fix the login test.',
    options: {
      hooks: hooks(monitor),
      pathToClaudeCodeExecutable: path.join(__dirname, '..', 'test', 'support', 'fake-claude.mjs'),
      mcpServersDelivery: 'argv',
      env: { ...process.env, FAKE_CLAUDE_SCENARIO: 'stuck' },
    },
  })
  monitor.on('verdict', (v) => console.log(`${v.action} (${v.reason}) at step ${v.step}`))
  for await (const message of trackSpend(monitor, q)) {
    if (message.type === 'result') console.log(`after ${message.num_turns} turns: ${message.result}`)
  }
  console.log(`spend: ${monitor.status().tasks[0].spendCents.toFixed(1)} cents`)
}

main()
// warn (repeated_step) at step 3
// warn (fail_streak) at step 3
// halt (repeated_step) at step 5
// after 5 turns: [agentbreaker] Run halted (repeated_step): the same step 5 times in a row (5 of 5): `pytest -q`
// spend: 3.0 cents
