'use strict'
// agentbreaker/langchain with LangChain.js v1: a stuck agent is nudged in its tool result, then
// its run ends with a message saying why. The model is fakeModel() from @langchain/core/testing
// so that this runs offline; pass your own chat model ('openai:gpt-4o', ...) instead.
//
//   node examples/langchain.js

const { AIMessage, createAgent, tool } = require('langchain')
const { fakeModel } = require('@langchain/core/testing')
const { z } = require('zod')
const { agentBreakerMiddleware } = require('agentbreaker/langchain')

const model = fakeModel()
for (let i = 1; i <= 20; i++) {
  model.respond(() => new AIMessage({
    content: 'Let me run the tests again.',
    tool_calls: [{ id: `call_${i}`, name: 'run_tests', args: { cmd: 'pytest -q' }, type: 'tool_call' }],
  }))
}

const runTests = tool(
  async () => {
    throw new Error('1 failed, 41 passed in 0.52s')
  },
  { name: 'run_tests', description: 'Runs the test suite', schema: z.object({ cmd: z.string() }) },
)

async function main() {
  const agent = createAgent({ model, tools: [runTests], middleware: [agentBreakerMiddleware()] })
  const out = await agent.invoke({ messages: [{ role: 'user', content: 'Fix the login test.' }] }, { recursionLimit: 100 })
  const nudged = out.messages.find((m) => m.type === 'tool' && String(m.content).includes('[agentbreaker]'))
  console.log('the model reads:', String(nudged.content).split('\n\n')[1])
  console.log('last message:', out.messages[out.messages.length - 1].content)
  console.log('verdict:', out.agentbreaker_verdict.reason)
}

main()
// the model reads: [agentbreaker] You have run `run_tests pytest -q` 3 times with the same failure. Repeating it will not change the outcome: try a different approach.
// last message: [agentbreaker] Run halted (repeated_step): the same step 5 times in a row (5 of 5): `run_tests pytest -q`
// verdict: repeated_step
