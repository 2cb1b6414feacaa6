// Type-checked (never run) with `tsc --noEmit --strict -p test/types-integrations`: each
// adapter against the real framework types.
import { Agent, Runner, run, tool as openaiTool } from '@openai/agents'
import { createAgent, tool as langchainTool } from 'langchain'
import { query } from '@anthropic-ai/claude-agent-sdk'
import { metrics } from '@opentelemetry/api'
import { z } from 'zod'
import { AgentHaltedError, FailureBreaker, Monitor, type RuleVerdict } from 'agentbreaker'
import { agentBreaker as openaiBreaker, SDK_TOOL_ERROR } from 'agentbreaker/openai-agents'
import { agentBreakerMiddleware, type AgentBreakerState } from 'agentbreaker/langchain'
import { hooks, SpendTracker, trackSpend } from 'agentbreaker/claude-agent-sdk'
import { instrument, VOCABULARY, type Instrumentation } from 'agentbreaker/otel'

export async function openai(): Promise<RuleVerdict | null> {
  const breaker = openaiBreaker({ toolLimits: { search: 5 } })
  const search = openaiTool({
    name: 'search',
    description: 'search',
    parameters: z.object({ q: z.string() }),
    execute: async ({ q }) => `no results for ${q}`,
    errorFunction: breaker.errorFunction(),
  })
  const agent = new Agent({ name: 'a', tools: [search] })
  const runner = new Runner()
  breaker.attach(runner).attach(agent)
  try {
    const result = await runner.run(agent, 'find it', breaker.runOptions({ maxTurns: 10 }))
    const out: string | undefined = result.finalOutput
    void out
    const streamed = await run(agent, 'find it', breaker.runOptions({ stream: true as const, context: { user: 'me' } }))
    await streamed.completed
    const cancelled: boolean = streamed.cancelled
    void cancelled
  } catch (error) {
    if (error instanceof AgentHaltedError) return breaker.halt
  }
  const text: string = SDK_TOOL_ERROR
  void text
  return breaker.verdict
}

export async function lang(): Promise<RuleVerdict | null | undefined> {
  const search = langchainTool(async ({ q }: { q: string }) => `no results for ${q}`, {
    name: 'search',
    description: 'search',
    schema: z.object({ q: z.string() }),
  })
  const middleware = agentBreakerMiddleware({ onHalt: 'end', toolErrors: 'message' })
  const agent = createAgent({ model: 'openai:gpt-4o-mini', tools: [search], middleware: [middleware] })
  const out = await agent.invoke({ messages: [{ role: 'user', content: 'find it' }] })
  const state: AgentBreakerState = out as AgentBreakerState
  // @ts-expect-error: onHalt is 'end' or 'throw'
  agentBreakerMiddleware({ onHalt: 'stop' })
  const monitor: Monitor = middleware.monitor
  void monitor
  return state.agentbreaker_verdict
}

export async function claude(): Promise<number> {
  const monitor = new Monitor()
  const q = query({ prompt: 'Fix the login test.', options: { hooks: hooks(monitor, { timeout: 30 }) } })
  let turns = 0
  for await (const message of trackSpend(monitor, q, { interrupt: () => q.interrupt() })) {
    if (message.type === 'result') turns = message.num_turns
  }
  const tracker = new SpendTracker(monitor)
  tracker.observe({ type: 'result', total_cost_usd: 0.01 })
  return turns
}

export function otel(): Instrumentation {
  const names: string[] = VOCABULARY.map((d) => d.name)
  void names
  instrument(new FailureBreaker(), { breaker: 'login' })
  // @ts-expect-error: a string is not instrumentable
  instrument('monitor')
  return instrument(new Monitor(), { meterProvider: metrics.getMeterProvider(), task: true, spanEvents: false })
}
