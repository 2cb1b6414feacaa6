// agentbreaker/langchain: a Monitor on a LangChain.js v1 agent (createAgent), as a middleware. See langchain.js.
import type { AgentMiddleware } from 'langchain'
import type { Monitor, MonitorConfig, RuleVerdict } from '../index.js'

export interface AgentBreakerMiddlewareOptions extends MonitorConfig {
  /** The Monitor to feed (else a new one from the settings). */
  monitor?: Monitor
  /**
   * 'end' (default): a halted run ends with an AIMessage saying why and the verdict in the
   * state's `agentbreaker_verdict`; 'throw': `invoke()` rejects with the AgentHaltedError.
   */
  onHalt?: 'end' | 'throw'
  /**
   * 'message' (default): a tool that throws is answered with an error ToolMessage the model reads
   * (LangChain's ToolNode text); 'throw': its exception ends the run.
   */
  toolErrors?: 'message' | 'throw'
}

/** The state fields the middleware adds. */
export interface AgentBreakerState {
  /** The run's last warn or halt verdict (null while it is healthy). */
  agentbreaker_verdict?: RuleVerdict | null
  /** The run's task id in the Monitor. */
  agentbreaker_task?: string
}

/** The middleware, with the Monitor it feeds and the latest warn/halt verdict of any run. */
export type AgentBreakerMiddleware = AgentMiddleware<any, undefined, any> & {
  readonly monitor: Monitor
  readonly lastVerdict: RuleVerdict | null
}

/** A middleware for `createAgent({ middleware: [agentBreakerMiddleware()] })`. */
export declare function agentBreakerMiddleware(options?: AgentBreakerMiddlewareOptions): AgentBreakerMiddleware
