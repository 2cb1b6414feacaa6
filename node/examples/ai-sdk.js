'use strict'
// agentbreaker/ai with the Vercel AI SDK: a stuck agent (the same failing tool call, whatever it
// is told) is nudged, then stopped. The model is the SDK's MockLanguageModelV3 so that this runs
// offline; put your own model (openai('gpt-4o'), anthropic('claude-sonnet-4-5'), ...) in its place.
//
//   node examples/ai-sdk.js

const { generateText, tool } = require('ai')
const { MockLanguageModelV3 } = require('ai/test')
const { z } = require('zod')
const { agentBreaker } = require('agentbreaker/ai')

let call = 0
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => {
    const last = prompt[prompt.length - 1]
    if (last.role === 'user' && call > 0) console.log('the model reads:', last.content[0].text)
    return {
      content: [{ type: 'tool-call', toolCallId: `call_${++call}`, toolName: 'run_tests', input: '{"cmd":"pytest -q"}' }],
      finishReason: { unified: 'tool-calls', raw: 'tool_use' },
      usage: { inputTokens: { total: 900, noCache: 900 }, outputTokens: { total: 40 } },
      warnings: [],
    }
  },
})

const tools = {
  run_tests: tool({
    description: 'Runs the test suite',
    inputSchema: z.object({ cmd: z.string() }),
    execute: async () => {
      throw new Error('1 failed, 41 passed in 0.52s')
    },
  }),
}

async function main() {
  const guard = agentBreaker()                                    // a Monitor with the coding-agent profile
  const result = await generateText({ model, tools, prompt: 'Fix the login test.', ...guard })
  console.log(`steps: ${result.steps.length}`)
  console.log(`halted: ${guard.halted} (${guard.verdict.reason}): ${guard.verdict.message}`)
}

main()
// the model reads: [agentbreaker] You have run `run_tests pytest -q` 3 times with the same failure. Repeating it will not change the outcome: try a different approach.
// steps: 5
// halted: true (repeated_step): the same step 5 times in a row (5 of 5): `run_tests pytest -q`
