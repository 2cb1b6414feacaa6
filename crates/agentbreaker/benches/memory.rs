//! Bytes per idle breaker, and for 100 000 of them, counted by a global allocator. Prints the
//! figures and appends them to `target/bench/rust.jsonl` when `AGENTBREAKER_BENCH_OUT` names it.

#![allow(clippy::unwrap_used, missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use agentbreaker::{
    BudgetBreaker, BudgetConfig, FailureBreaker, FailureConfig, StagnationBreaker, StagnationConfig,
};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call forwards to the system allocator unchanged; only a counter is added.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Heap bytes plus the value's own size, for `n` values made by `make`.
fn measure<T>(n: usize, make: impl Fn() -> T) -> f64 {
    let before = LIVE.load(Ordering::SeqCst);
    let values: Vec<T> = (0..n).map(|_| make()).collect();
    let heap = LIVE.load(Ordering::SeqCst) - before;
    let vec_own = (values.capacity() * std::mem::size_of::<T>()) as isize;
    // The Vec's buffer is counted in `heap`; it holds exactly the values' own bytes.
    let total = heap.max(vec_own);
    drop(values);
    total as f64 / n as f64
}

/// An operation, our bytes, and the peers' (name, bytes).
type Row = (&'static str, f64, Vec<(&'static str, f64)>);

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` from tooling
    }
    // (operation, ours, peers): a peer is another crate's breaker in the same role.
    let failure = || FailureBreaker::new(FailureConfig::default()).unwrap();
    let closed_peers = |n: usize| {
        vec![
            ("recloser", measure(n, recloser::Recloser::default)),
            ("failsafe", measure(n, || failsafe::Config::new().build())),
        ]
    };
    let rows: Vec<Row> = vec![
        ("idle FailureBreaker", measure(1, failure), closed_peers(1)),
        (
            "FailureBreaker, each of 100 000",
            measure(100_000, failure),
            closed_peers(100_000),
        ),
        (
            "idle StagnationBreaker",
            measure(1, || {
                StagnationBreaker::new(StagnationConfig::default()).unwrap()
            }),
            vec![],
        ),
        (
            "idle BudgetBreaker",
            measure(1, || BudgetBreaker::new(BudgetConfig::default()).unwrap()),
            vec![],
        ),
    ];
    let mut out = String::new();
    for (what, bytes, peers) in rows {
        println!("{what}: {bytes:.0} bytes");
        let peers: Vec<(Option<&str>, Option<f64>)> = if peers.is_empty() {
            vec![(None, None)]
        } else {
            peers.into_iter().map(|(p, b)| (Some(p), Some(b))).collect()
        };
        for (peer, peer_bytes) in peers {
            if let (Some(p), Some(b)) = (peer, peer_bytes) {
                println!("  {p}: {b:.0} bytes");
            }
            let mut row = serde_json::json!({
                "surface": "rust", "operation": what, "ours_ns": bytes.round(),
                "peer": peer, "peer_ns": peer_bytes.map(f64::round), "unit": "bytes",
            });
            if what == "idle FailureBreaker" {
                row["max"] = serde_json::json!(2048); // the bound
            }
            out.push_str(&format!("{row}\n"));
        }
    }
    if let Ok(path) = std::env::var("AGENTBREAKER_BENCH_OUT") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(out.as_bytes()).unwrap();
    }
}
