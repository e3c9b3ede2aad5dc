//! `bench schema N <server-cmd> [args…]`: what checking each result
//! against its tool's `outputSchema` costs a call. N calls of the server's
//! `structured` tool (`misbehave --structured`: a schema with `$ref` and a
//! `pattern`) on a connection that listed its tools (so every result is
//! checked) against a connection that did not (so none is), alternating in
//! rounds, in one run; then the check alone, in process, on the same result.

use std::time::{Duration, Instant};

use serde_json::json;
use tether::{CallOptions, Client, ClientOptions};

use crate::scripts::{percentile, us};
use crate::transport;

pub(crate) fn schema(n: usize, server: &[String]) {
    let connect = |listed: bool| {
        let client = Client::connect("bench", &transport(server), ClientOptions::default())
            .expect("connects");
        if listed {
            client.list_tools(&CallOptions::default()).expect("lists tools");
        }
        client
    };
    let (checked, unchecked) = (connect(true), connect(false));
    let arguments = json!({"value": {"point": {"x": 3, "label": "north"}}});
    let options = CallOptions::default();
    let (mut with, mut without) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let round = (n / 10).max(1);
    while with.len() < n {
        for (client, times) in [(&checked, &mut with), (&unchecked, &mut without)] {
            for _ in 0..round.min(n - times.len()) {
                let started = Instant::now();
                let result = client.call_tool("structured", arguments.clone(), &options).unwrap();
                times.push(started.elapsed());
                assert!(result.schema_mismatch.is_none(), "{:?}", result.schema_mismatch);
            }
        }
    }
    let p50 = |times: &[Duration]| us(percentile(times, 0.5));
    println!("calls checked:   p50 {:.1} µs, p90 {:.1} µs", p50(&with), us(percentile(&with, 0.9)));
    println!(
        "calls unchecked: p50 {:.1} µs, p90 {:.1} µs",
        p50(&without),
        us(percentile(&without, 0.9))
    );
    println!("checked / unchecked (p50): {:.3}", p50(&with) / p50(&without));
    let tools = checked.list_tools(&CallOptions::default()).unwrap();
    let schema = tools.iter().find(|tool| tool.name == "structured").unwrap();
    let schema = schema.output_schema.clone().unwrap();
    let value = &arguments["value"];
    let started = Instant::now();
    for _ in 0..n {
        tether::for_cli::check_schema(value, &schema).unwrap();
    }
    println!("the check alone: {:.2} µs a result", us(started.elapsed()) / n as f64);
    checked.close().unwrap();
    unchecked.close().unwrap();
}
