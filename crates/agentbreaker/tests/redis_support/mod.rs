//! A real `redis-server` for the Redis tests (Debian's package; `make test-redis` installs it):
//! started on a free loopback port with a temporary directory and no persistence, stopped when
//! dropped (also when the test fails), and killed, paused, resumed or restarted empty on demand.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The ignore reason of every test that needs a server.
pub const NEEDS_REDIS: &str = "needs redis-server: run by make test-redis";

pub struct RedisServer {
    child: Option<Child>,
    paused: bool,
    pub port: u16,
    dir: tempfile::TempDir,
    args: Vec<String>,
    /// With TLS: the CA certificate clients must trust (the server speaks only TLS).
    pub tls_ca: Option<PathBuf>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn binary() -> PathBuf {
    std::env::var_os("AGENTBREAKER_REDIS_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("redis-server"))
}

impl RedisServer {
    /// A server with the default options.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra options (`--requirepass`, ...).
    pub fn start_with(args: &[&str]) -> Self {
        let mut server = RedisServer {
            child: None,
            paused: false,
            port: free_port(),
            dir: tempfile::tempdir().unwrap(),
            args: args.iter().map(|a| a.to_string()).collect(),
            tls_ca: None,
        };
        server.spawn();
        server
    }

    /// A server that speaks only TLS, with a throw-away CA and a certificate for 127.0.0.1
    /// (made with the openssl command).
    pub fn start_tls() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let p = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .output()
                .expect("openssl");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        std::fs::write(p("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").unwrap();
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &p("ca.key"),
            "-out",
            &p("ca.crt"),
            "-days",
            "2",
            "-subj",
            "/CN=agentbreaker test CA",
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &p("server.key"),
            "-out",
            &p("server.csr"),
            "-subj",
            "/CN=127.0.0.1",
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &p("server.csr"),
            "-CA",
            &p("ca.crt"),
            "-CAkey",
            &p("ca.key"),
            "-CAcreateserial",
            "-out",
            &p("server.crt"),
            "-days",
            "2",
            "-extfile",
            &p("ext.cnf"),
        ]);
        let port = free_port();
        let mut server = RedisServer {
            child: None,
            paused: false,
            port,
            args: vec![
                "--port".into(),
                "0".into(),
                "--tls-port".into(),
                port.to_string(),
                "--tls-cert-file".into(),
                p("server.crt"),
                "--tls-key-file".into(),
                p("server.key"),
                "--tls-ca-cert-file".into(),
                p("ca.crt"),
                "--tls-auth-clients".into(),
                "no".into(),
            ],
            tls_ca: Some(dir.path().join("ca.crt")),
            dir,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new(binary())
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--loglevel", "warning"])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {}: {e} (install Debian's redis-server; make test-redis does)",
                    binary().display()
                )
            });
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = self.cli(&["PING"]);
            if answer.contains("PONG") || answer.contains("NOAUTH") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `redis://127.0.0.1:<port>/0` (`rediss://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls_ca.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/0", self.port)
    }

    /// How many EVALSHA calls the server has run (INFO commandstats).
    pub fn evalsha_calls(&self) -> u64 {
        self.cli(&["INFO", "commandstats"])
            .lines()
            .find(|l| l.starts_with("cmdstat_evalsha:"))
            .and_then(|l| l.split("calls=").nth(1))
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Runs redis-cli against the server (with `-a` when the server needs a password) and
    /// returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("redis-cli");
        cmd.args(["-p", &self.port.to_string()]);
        if let Some(ca) = &self.tls_ca {
            cmd.arg("--tls").arg("--cacert").arg(ca);
        }
        if let Some(i) = self.args.iter().position(|a| a == "--requirepass") {
            cmd.args(["--no-auth-warning", "-a", &self.args[i + 1]]);
        }
        let out = cmd.args(args).output().expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().expect("running").id() as i32)
    }

    /// SIGKILL: the server is gone (and its data with it).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.paused {
                let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
                self.paused = false;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A new, empty server on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// SIGSTOP: connections stay open, nothing answers.
    pub fn pause(&mut self) {
        kill(self.pid(), Signal::SIGSTOP).unwrap();
        self.paused = true;
    }

    /// SIGCONT.
    pub fn resume(&mut self) {
        kill(self.pid(), Signal::SIGCONT).unwrap();
        self.paused = false;
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until `f` holds, polling, for at most `limit`.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
