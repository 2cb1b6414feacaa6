// Type-checked (never run) with `tsc --noEmit --strict -p test/types-integrations`: the
// agentbreaker/ai guard spread into the real ai types.
import { generateText, streamText, stepCountIs, tool, ToolLoopAgent, type LanguageModel } from 'ai'
import { z } from 'zod'
import { AgentHaltedError, Monitor, type RuleVerdict } from 'agentbreaker'
import { agentBreaker, breakerStopWhen, type AgentBreaker } from 'agentbreaker/ai'

declare const model: LanguageModel

const tools = {
  search: tool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => `no results for ${q}` }),
}

export async function run(): Promise<RuleVerdict | null> {
  const guard = agentBreaker({ toolLimits: { search: 10 }, stopWhen: stepCountIs(30) })
  const result = await generateText({ model, tools, prompt: 'find it', ...guard })
  const text: string = result.text
  void text
  const stream = streamText({ model, tools, prompt: 'find it', ...agentBreaker() })
  for await (const part of stream.fullStream) void part
  const agent = new ToolLoopAgent({ model, tools, ...agentBreaker({ monitor: new Monitor() }) })
  await agent.generate({ prompt: 'find it' })
  // your own prepareStep: its result type (activeTools of your tools) is kept
  const typed = agentBreaker({
    prepareStep: ({ stepNumber }) => (stepNumber > 2 ? { activeTools: ['search' as const] } : undefined),
  })
  await generateText({ model, tools, prompt: 'x', ...typed })
  const sharedMonitor = new Monitor()
  await generateText({ model, tools, prompt: 'x', stopWhen: [stepCountIs(5), breakerStopWhen(sharedMonitor)] })
  try {
    await generateText({ model, tools, prompt: 'x', ...agentBreaker({ onHalt: 'throw' }) })
  } catch (error) {
    if (error instanceof AgentHaltedError) return error.verdict.reason === null ? null : guard.halt
  }
  const g: AgentBreaker = guard
  // @ts-expect-error: maxSteps is a number
  agentBreaker({ maxSteps: 'ten' })
  return g.halted ? g.halt : g.verdict
}
