// agentbreaker/claude-agent-sdk: a Monitor on a Claude Agent SDK session. See claude-agent-sdk.js.
import type { HookCallbackMatcher, HookEvent, SDKMessage } from '@anthropic-ai/claude-agent-sdk'
import type { Monitor, RuleVerdict, Verdict } from '../index.js'

export interface HooksOptions {
  /** The session's task in the Monitor (default: the Monitor's current task); subagents count for their agent_id. */
  taskId?: string
  /** The matchers' timeout in seconds (the SDK's default: 60). */
  timeout?: number
}

/**
 * The `hooks` option of `query()` feeding every tool call to `monitor`: PreToolUse, PostToolUse,
 * PostToolUseFailure, Stop, SubagentStop and UserPromptSubmit. A warning answers with
 * `additionalContext` (the nudge) and `systemMessage`; a halt denies the call
 * (`permissionDecision: 'deny'`) and stops the session (`continue: false`, `stopReason`).
 */
export declare function hooks(monitor: Monitor, options?: HooksOptions): Partial<Record<HookEvent, HookCallbackMatcher[]>>

export interface SpendOptions {
  /** The task the spend counts for (default: the Monitor's current task). */
  taskId?: string
}

/** Feeds the SDK's messages (assistant usage, the result's total_cost_usd) into the Monitor's spend. */
export declare class SpendTracker {
  constructor(monitor: Monitor, options?: SpendOptions)
  get monitor(): Monitor
  /** The halt verdict once spend halted the task. */
  get halt(): RuleVerdict | null
  /** Feeds one message; the verdict of the spend it added (null if it added none). */
  observe(message: SDKMessage | { type: string; [key: string]: unknown }): Verdict | null
}

/**
 * Yields the messages unchanged, feeding each into the Monitor's spend; `interrupt` (e.g.
 * `() => q.interrupt()`) is awaited once when spend halts the task.
 */
export declare function trackSpend<M>(
  monitor: Monitor,
  messages: AsyncIterable<M>,
  options?: SpendOptions & { interrupt?: () => unknown },
): AsyncGenerator<M, void, undefined>

/** Claude Code's failure text with a leading `Exit code N` line moved to the end. */
export declare function failureText(error: string): string
