//! The connection of one store-backed object to Redis (docs/distributed.md, "Connections").
//!
//! A [`Link`] owns a command connection, which callers use one at a time under the link's lock
//! with a deadline per call, and a background thread that connects with backoff, loads the
//! object's Lua scripts, subscribes to its channel, lets the object read its state
//! ([`LinkUser::on_connect`]) and then hands it every pub/sub message until the connection fails
//! or the link is dropped. Callers never connect and never wait for a connection: while the link
//! is down a call returns at once and the object falls back (contract §12's `storeFailure`).
//!
//! Scripts run with EVALSHA; a NOSCRIPT reply (the server's script cache was flushed, or it
//! restarted) loads the script again and retries once, within the same deadline. Every message
//! that leaves this module has the URL's password scrubbed from it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Client, Connection, ErrorKind, RedisError, Value};

use crate::error::{Error, Result};
use crate::store::{StoreFailure, StoreMode, StoreStatus, StoreUrl, scrub};

/// How long the background thread blocks on its subscription before it looks at its flags.
const POLL: Duration = Duration::from_millis(100);
/// A subscription silent for this long is pinged, to find a dead connection.
const PING_AFTER: Duration = Duration::from_secs(2);
/// Reconnect backoff: the first delay and the largest.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// The shortest time the background thread gives a connection attempt and a ping (no caller
/// waits for either).
const BACKGROUND_TIMEOUT_MIN: Duration = Duration::from_secs(1);

/// What a link connects to and runs.
#[derive(Debug)]
pub(crate) struct LinkConfig {
    /// The store URL.
    pub url: StoreUrl,
    /// The budget of one call (`storeTimeoutMs`).
    pub timeout: Duration,
    /// The pub/sub channel to subscribe to, if any.
    pub channel: Option<String>,
    /// The Lua scripts, by index.
    pub scripts: Vec<String>,
}

/// The object a link serves. Its methods run on the link's background thread, except `on_down`,
/// which may also run on a caller's thread; `on_up` and `on_down` run with the link's lock held,
/// so they must not call back into the link.
pub(crate) trait LinkUser: Send + Sync + 'static {
    /// After (re)connecting and subscribing, before the link is up: read the state with the new
    /// session (a fault here ends the attempt like a failed connection).
    fn on_connect(&self, session: &mut Session) -> std::result::Result<(), Fault>;
    /// A pub/sub message on the channel.
    fn on_message(&self, payload: &[u8]);
    /// The link is up. `rejoined` is true when an outage that callers were told about ended.
    fn on_up(&self, rejoined: bool);
    /// The link is down: callers fall back until it is up again.
    fn on_down(&self);
}

/// Why a call or a connection attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// No answer within the deadline.
    Timeout,
    /// No connection: refused, reset, closed, the host unknown, the link already down.
    Unreachable,
    /// The server refused the credentials (WRONGPASS, NOAUTH, NOPERM).
    Auth,
    /// A key under the prefix holds another type.
    WrongType,
    /// Any other refusal by the server (SELECT out of range, OOM, a script error).
    Refused,
    /// A reply of an unexpected shape.
    Protocol,
}

/// A failed call or connection attempt, its message without the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    pub kind: FaultKind,
    pub message: String,
}

impl Fault {
    pub(crate) fn new(kind: FaultKind, message: impl Into<String>) -> Self {
        Fault {
            kind,
            message: message.into(),
        }
    }

    /// A fault that waiting will not cure: at construction it is an `IO` error, not an outage.
    pub(crate) fn is_misconfiguration(&self) -> bool {
        matches!(
            self.kind,
            FaultKind::Auth | FaultKind::WrongType | FaultKind::Refused
        )
    }

    fn from_redis(e: &RedisError, secrets: &[String]) -> Self {
        let text = scrub(&e.to_string(), secrets);
        let code = e.code().unwrap_or("");
        let kind = if e.is_timeout() {
            FaultKind::Timeout
        } else if e.kind() == ErrorKind::AuthenticationFailed
            || matches!(code, "NOAUTH" | "WRONGPASS" | "NOPERM")
        {
            FaultKind::Auth
        } else if code == "WRONGTYPE" || text.contains("WRONGTYPE") {
            FaultKind::WrongType
        } else if code == "LOADING" || e.is_io_error() || e.is_connection_dropped() {
            FaultKind::Unreachable
        } else if matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension) {
            FaultKind::Refused
        } else if matches!(e.kind(), ErrorKind::Parse | ErrorKind::UnexpectedReturnType) {
            FaultKind::Protocol
        } else {
            FaultKind::Unreachable
        };
        let text = match kind {
            FaultKind::Timeout => format!("no answer in time ({text})"),
            FaultKind::Auth => format!("the server refused the credentials ({text})"),
            _ => text,
        };
        Fault::new(kind, text)
    }
}

/// A command connection with the link's scripts loaded.
pub(crate) struct Session {
    conn: Connection,
    shas: Vec<String>,
    sources: Arc<[String]>,
    secrets: Arc<[String]>,
    /// The socket timeout currently set.
    armed: Duration,
    /// The budget of one call.
    timeout: Duration,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Session {
    /// Runs script `script` with EVALSHA. `deadline` bounds the whole call, including a reload
    /// after NOSCRIPT; `None` uses the socket timeout already set (the background thread's).
    pub(crate) fn eval(
        &mut self,
        script: usize,
        keys: &[&str],
        args: &[&str],
        deadline: Option<Instant>,
    ) -> std::result::Result<Value, Fault> {
        self.arm(deadline)?;
        match self.evalsha(script, keys, args) {
            Err(e) if e.code() == Some("NOSCRIPT") => {
                // The server's script cache was flushed (SCRIPT FLUSH, a restart): load again.
                self.arm(deadline)?;
                let sha: String = redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(&self.sources[script])
                    .query(&mut self.conn)
                    .map_err(|e| self.fault(&e))?;
                self.shas[script] = sha;
                self.arm(deadline)?;
                self.evalsha(script, keys, args).map_err(|e| self.fault(&e))
            }
            other => other.map_err(|e| self.fault(&e)),
        }
    }

    fn evalsha(
        &mut self,
        script: usize,
        keys: &[&str],
        args: &[&str],
    ) -> std::result::Result<Value, RedisError> {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.shas[script]).arg(keys.len());
        for k in keys {
            cmd.arg(*k);
        }
        for a in args {
            cmd.arg(*a);
        }
        cmd.query(&mut self.conn)
    }

    fn fault(&self, e: &RedisError) -> Fault {
        Fault::from_redis(e, &self.secrets)
    }

    /// Sets the socket timeouts to what is left of the deadline, less a tenth (at most 5 ms):
    /// a socket timeout fires a few milliseconds late on a busy machine, and the call must
    /// return within its budget. A syscall only when that differs from what is set by more than
    /// a millisecond.
    fn arm(&mut self, deadline: Option<Instant>) -> std::result::Result<(), Fault> {
        let Some(deadline) = deadline else {
            return Ok(());
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(1) {
            return Err(Fault::new(
                FaultKind::Timeout,
                format!(
                    "no answer within storeTimeoutMs ({} ms)",
                    self.timeout.as_millis()
                ),
            ));
        }
        let want = early(left.min(self.timeout));
        if want.abs_diff(self.armed) > Duration::from_millis(1) {
            self.set_timeouts(want)?;
        }
        Ok(())
    }

    fn set_timeouts(&mut self, t: Duration) -> std::result::Result<(), Fault> {
        self.conn
            .set_read_timeout(Some(t))
            .and_then(|()| self.conn.set_write_timeout(Some(t)))
            .map_err(|e| Fault::from_redis(&e, &self.secrets))?;
        self.armed = t;
        Ok(())
    }
}

/// A socket timeout for a budget: a tenth (at most 5 ms) shorter, never under a millisecond.
fn early(budget: Duration) -> Duration {
    budget
        .saturating_sub((budget / 10).min(Duration::from_millis(5)))
        .max(Duration::from_millis(1))
}

#[derive(Debug)]
struct Outage {
    reason: String,
    reported: bool,
}

#[derive(Debug, Default)]
struct LinkState {
    session: Option<Session>,
    up: bool,
    stop: bool,
    /// The first connection attempt has finished (construction waits for it).
    settled: bool,
    first_fault: Option<Fault>,
    outage: Option<Outage>,
    rejoin_due: bool,
    outages: u64,
    last_error: Option<String>,
}

struct LinkInner {
    config: LinkConfig,
    client: Client,
    sources: Arc<[String]>,
    secrets: Arc<[String]>,
    user: Arc<dyn LinkUser>,
    state: Mutex<LinkState>,
    signal: Condvar,
}

impl LinkInner {
    fn lock(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the link down after `fault` (once per outage: the first fault names it).
    fn fail(&self, st: &mut LinkState, fault: &Fault) {
        st.last_error = Some(fault.message.clone());
        st.session = None;
        if st.up {
            st.up = false;
            self.user.on_down();
        }
        if st.outage.is_none() {
            st.outage = Some(Outage {
                reason: fault.message.clone(),
                reported: false,
            });
            st.outages = st.outages.saturating_add(1);
        }
        if !st.settled {
            st.settled = true;
            st.first_fault = Some(fault.clone());
        }
        self.signal.notify_all();
    }

    fn background_timeout(&self) -> Duration {
        self.config.timeout.max(BACKGROUND_TIMEOUT_MIN)
    }

    fn connect(&self) -> std::result::Result<Connection, Fault> {
        let t = self.background_timeout();
        let conn = self
            .client
            .get_connection_with_timeout(t)
            .map_err(|e| Fault::from_redis(&e, &self.secrets))?;
        conn.set_read_timeout(Some(t))
            .and_then(|()| conn.set_write_timeout(Some(t)))
            .map_err(|e| Fault::from_redis(&e, &self.secrets))?;
        Ok(conn)
    }

    fn open_session(&self) -> std::result::Result<Session, Fault> {
        let mut conn = self.connect()?;
        let mut load = redis::pipe();
        for source in self.sources.iter() {
            load.cmd("SCRIPT").arg("LOAD").arg(source);
        }
        let shas: Vec<String> = load
            .query(&mut conn)
            .map_err(|e| Fault::from_redis(&e, &self.secrets))?;
        Ok(Session {
            conn,
            shas,
            sources: Arc::clone(&self.sources),
            secrets: Arc::clone(&self.secrets),
            armed: self.background_timeout(),
            timeout: self.config.timeout,
        })
    }

    /// Connects, subscribes, lets the user read its state, marks the link up and serves
    /// messages. Returns `Ok` when the link is stopped, or the fault that ended the connection
    /// and whether the link had been up.
    fn connected_life(&self) -> std::result::Result<(), (Fault, bool)> {
        let fault = |f: Fault| (f, false);
        let mut session = self.open_session().map_err(fault)?;
        let mut subscriber = match &self.config.channel {
            Some(_) => Some(self.connect().map_err(fault)?),
            None => None,
        };
        let mut pubsub = subscriber.as_mut().map(|c| c.as_pubsub());
        if let (Some(ps), Some(channel)) = (pubsub.as_mut(), &self.config.channel) {
            ps.subscribe(channel)
                .map_err(|e| fault(Fault::from_redis(&e, &self.secrets)))?;
        }
        // Subscribed first, then read: a change after the read arrives as a message.
        self.user.on_connect(&mut session).map_err(fault)?;
        session
            .set_timeouts(early(self.config.timeout))
            .map_err(fault)?;
        {
            let mut st = self.lock();
            if st.stop {
                return Ok(());
            }
            st.session = Some(session);
            st.up = true;
            st.settled = true;
            let rejoined = st.outage.take().is_some_and(|o| o.reported);
            st.rejoin_due = rejoined;
            self.user.on_up(rejoined);
            self.signal.notify_all();
        }
        if let Some(ps) = pubsub.as_mut() {
            ps.set_read_timeout(Some(POLL))
                .map_err(|e| (Fault::from_redis(&e, &self.secrets), true))?;
        }
        let mut last_heard = Instant::now();
        loop {
            {
                let st = self.lock();
                if st.stop {
                    return Ok(());
                }
                if !st.up {
                    let reason = st.last_error.clone().unwrap_or_default();
                    return Err((Fault::new(FaultKind::Unreachable, reason), true));
                }
            }
            let Some(ps) = pubsub.as_mut() else {
                let st = self.lock();
                let _ = self.signal.wait_timeout(st, POLL);
                continue;
            };
            match ps.get_message() {
                Ok(msg) => {
                    last_heard = Instant::now();
                    self.user.on_message(msg.get_payload_bytes());
                }
                Err(e) if e.is_timeout() => {
                    if last_heard.elapsed() >= PING_AFTER {
                        let ping = ps
                            .set_read_timeout(Some(self.background_timeout()))
                            .and_then(|()| ps.ping::<Value>())
                            .and_then(|_| ps.set_read_timeout(Some(POLL)));
                        ping.map_err(|e| (Fault::from_redis(&e, &self.secrets), true))?;
                        last_heard = Instant::now();
                    }
                }
                Err(e) => return Err((Fault::from_redis(&e, &self.secrets), true)),
            }
        }
    }

    /// The background thread: connect, serve, and after a failure wait (with backoff and jitter)
    /// and connect again, until the link is dropped.
    fn run(&self) {
        let mut backoff = BACKOFF_MIN;
        let mut jitter = Jitter::new();
        loop {
            let outcome = catch_unwind(AssertUnwindSafe(|| self.connected_life()));
            let (fault, was_up) = match outcome {
                Ok(Ok(())) => return,
                Ok(Err(e)) => e,
                Err(_) => (
                    Fault::new(FaultKind::Protocol, "internal error in the store thread"),
                    false,
                ),
            };
            if was_up {
                backoff = BACKOFF_MIN;
            }
            let mut st = self.lock();
            if st.stop {
                return;
            }
            self.fail(&mut st, &fault);
            let deadline = Instant::now() + jitter.spread(backoff);
            while !st.stop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                st = self
                    .signal
                    .wait_timeout(st, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            if st.stop {
                return;
            }
            drop(st);
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }
}

/// Spreads reconnect delays (0.5x to 1.5x) so a fleet does not reconnect in lockstep.
struct Jitter(u64);

impl Jitter {
    fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        Jitter(h.finish() | 1)
    }

    fn spread(&mut self, d: Duration) -> Duration {
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let permille = 500 + self.0 % 1001;
        d * u32::try_from(permille).unwrap_or(1000) / 1000
    }
}

/// The connection of one store-backed object. Dropping it stops the background thread (within
/// [`POLL`]) and closes the connections.
pub(crate) struct Link {
    inner: Arc<LinkInner>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("url", &self.inner.config.url)
            .finish_non_exhaustive()
    }
}

/// What [`Link::status`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinkStatus {
    pub up: bool,
    pub outages: u64,
    pub last_error: Option<String>,
}

impl Link {
    /// What `storeStatus` reports for an object whose shared state lives under `key`: shared
    /// while the link is up, else local or refusing as `on_failure` says.
    pub(crate) fn store_status(&self, key: &str, on_failure: StoreFailure) -> StoreStatus {
        let link = self.status();
        StoreStatus {
            url: self.url().redacted(),
            key: key.to_string(),
            mode: if link.up {
                StoreMode::Shared
            } else if on_failure == StoreFailure::Open {
                StoreMode::Local
            } else {
                StoreMode::Refusing
            },
            outages: link.outages,
            last_error: link.last_error,
        }
    }

    /// Starts the link and waits up to the call budget for the first connection. A malformed
    /// URL is `INVALID_CONFIG`; credentials the server refuses, a key of another type or another
    /// refusal is `IO`; no answer in time (or no connection) is an outage: the link is returned
    /// down and keeps trying in the background.
    pub(crate) fn start(config: LinkConfig, user: Arc<dyn LinkUser>) -> Result<Link> {
        let secrets: Arc<[String]> = config.url.secrets().into();
        let client = Client::open(config.url.as_secret_str()).map_err(|e| {
            Error::config(format_args!(
                "store is not a valid Redis URL: {}",
                scrub(&e.to_string(), &secrets)
            ))
        })?;
        if config.url.is_tls() {
            // rustls needs a process-wide crypto provider; keep one another part of the host
            // installed first.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let timeout = config.timeout;
        let inner = Arc::new(LinkInner {
            sources: config.scripts.clone().into(),
            config,
            client,
            secrets,
            user,
            state: Mutex::new(LinkState::default()),
            signal: Condvar::new(),
        });
        let worker = Arc::clone(&inner);
        thread::Builder::new()
            .name("agentbreaker-store".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::io(format_args!("cannot start the store thread: {e}")))?;
        let deadline = Instant::now() + timeout;
        let mut st = inner.lock();
        while !st.settled {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = inner
                .signal
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if !st.settled && st.outage.is_none() {
            st.outage = Some(Outage {
                reason: format!(
                    "no answer within storeTimeoutMs ({} ms)",
                    timeout.as_millis()
                ),
                reported: false,
            });
            st.outages = st.outages.saturating_add(1);
        }
        if !st.up
            && let Some(fault) = st.first_fault.clone().filter(Fault::is_misconfiguration)
        {
            st.stop = true;
            inner.signal.notify_all();
            return Err(Error::io(format_args!(
                "store {}: {}",
                inner.config.url.redacted(),
                fault.message
            )));
        }
        drop(st);
        Ok(Link { inner })
    }

    /// Takes the link for one call (or a few in a row): callers of one object use the command
    /// connection one at a time.
    pub(crate) fn lock(&self) -> LinkGuard<'_> {
        LinkGuard {
            st: self.inner.lock(),
            inner: &self.inner,
        }
    }

    /// Whether the link is up, how many outages it had and the last error.
    pub(crate) fn status(&self) -> LinkStatus {
        let st = self.inner.lock();
        LinkStatus {
            up: st.up,
            outages: st.outages,
            last_error: st.last_error.clone(),
        }
    }

    /// The store URL.
    pub(crate) fn url(&self) -> &StoreUrl {
        &self.inner.config.url
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let mut st = self.inner.lock();
        st.stop = true;
        st.session = None;
        self.inner.signal.notify_all();
    }
}

/// The link, taken for a call.
pub(crate) struct LinkGuard<'a> {
    st: MutexGuard<'a, LinkState>,
    inner: &'a LinkInner,
}

impl LinkGuard<'_> {
    /// Whether calls can be made.
    pub(crate) fn is_up(&self) -> bool {
        self.st.up
    }

    /// Runs a script within `deadline`; a fault marks the link down (the background thread
    /// reconnects).
    pub(crate) fn eval(
        &mut self,
        script: usize,
        keys: &[&str],
        args: &[&str],
        deadline: Instant,
    ) -> std::result::Result<Value, Fault> {
        let outcome = match self.st.session.as_mut() {
            Some(session) => session.eval(script, keys, args, Some(deadline)),
            None => Err(Fault::new(FaultKind::Unreachable, "not connected")),
        };
        if let Err(fault) = &outcome {
            self.inner.fail(&mut self.st, fault);
        }
        outcome
    }

    /// Marks the link down after a fault found outside [`LinkGuard::eval`] (a reply of the wrong
    /// shape).
    pub(crate) fn fail(&mut self, fault: &Fault) {
        self.inner.fail(&mut self.st, fault);
    }

    /// The reason of the current outage, once per outage (the caller that takes it tells the
    /// object's listeners and switches to the fallback).
    pub(crate) fn take_outage(&mut self) -> Option<String> {
        let outage = self.st.outage.as_mut()?;
        if outage.reported {
            return None;
        }
        outage.reported = true;
        Some(outage.reason.clone())
    }

    /// True once after the link came back from an outage that was reported.
    pub(crate) fn take_rejoin(&mut self) -> bool {
        std::mem::take(&mut self.st.rejoin_due)
    }
}
