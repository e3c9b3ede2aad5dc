//! A non-async agent loop on tether, with a scripted "model" instead of a real one.
//!
//! ```text
//! cargo run --example agent_loop            # uses fixtures/demo/mcp.json
//! cargo run --example agent_loop -- DIR     # another configuration folder
//! ```
//!
//! Each turn: refresh the hub, take the tools to declare, let the "model"
//! pick a call, make it with a timeout and a progress callback, and shape
//! the result for the model. `count_words` is made deferred, so the model
//! has to find it with `tool_search` first; `echo` is reached by codemode,
//! so the model writes a script for the `codemode` tool, which the servers
//! section of the system prompt told it about. With a `wordcount` server
//! configured (codemode's own example), that script is the example's:
//! `return await tools.mcp__wordcount__word_count({ text: "the quick brown fox" });`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tether::{
    shape_result, CallOptions, ConfigLoader, Exposure, Hub, HubOptions, LogFile, ModelBlock,
    ModelTool, NestedCall, ParentCall, PlannedCall, ResultLimits, Tool, Verdict,
};

/// The "model": for each turn, the tool it wants and the arguments it gives,
/// provided the tool was declared to it.
const SCRIPT: &[(&str, &str)] = &[
    ("tool_search", r#"{"query": "count the words in a text"}"#),
    ("mcp__demo__count_words", r#"{"text": "the quick brown fox jumps over the lazy dog"}"#),
    ("codemode", r#"{"code": "return await tools.mcp__demo__echo({ text: \"done\" });"}"#),
];

/// The script the "model" writes when a `wordcount` server is configured:
/// codemode's own example, verbatim.
const WORDCOUNT_SCRIPT: &str =
    r#"return await tools.mcp__wordcount__word_count({ text: "the quick brown fox" });"#;

/// The host's say over each call a script makes: here it allows all and
/// shows them.
struct ShowNested;

impl tether::CallHook for ShowNested {
    fn before_call(&self, call: &PlannedCall) -> Verdict {
        println!("  script #{} calls {} {}", call.parent.run, call.name, call.arguments);
        Verdict::Allow
    }

    fn after_call(&self, call: &NestedCall, _parent: &ParentCall) {
        println!(
            "  script call {} ended: {} in {:?}",
            call.name,
            call.outcome.as_str(),
            call.elapsed
        );
    }
}

fn main() {
    env_logger::init();
    let config_dir =
        std::env::args().nth(1).map_or_else(|| PathBuf::from("fixtures/demo"), PathBuf::from);
    let loader = ConfigLoader::new().config_dir(&config_dir).project_dir(".");
    let mut config = loader.load();
    for warning in &config.warnings {
        eprintln!("config warning: {warning}");
    }
    // Make one tool deferred (declared only once tool_search finds it) and
    // one reached from codemode scripts.
    for server in &mut config.servers {
        server.tool_exposure.push(("count_words".into(), Exposure::Deferred));
        server.tool_exposure.push(("echo".into(), Exposure::Codemode));
    }
    let log = LogFile::new(std::env::temp_dir().join("tether-agent-loop.log"));
    let options = HubOptions::default()
        .with_background(true) // return at once; model_tools() waits for what it needs
        .with_log_sink(Arc::new(log))
        .with_call_hook(Arc::new(ShowNested));
    let hub = Hub::start(config, options);
    let limits = ResultLimits::default();
    let mut shown_prompt = 0;
    let mut servers_section = String::new();

    for (turn, (wanted, arguments)) in SCRIPT.iter().enumerate() {
        // The start of a turn: servers whose configuration changed restart,
        // crashed ones come back. (This hub has no loader, so only the latter.)
        let report = hub.refresh();
        if !report.is_empty() {
            println!("refresh: {report:?}");
        }
        let tools = hub.model_tools();
        println!("\nturn {}: {} tools declared: {}", turn + 1, tools.len(), names(&tools));
        // The servers section of the system prompt, appended when it changed.
        let prompt = hub.servers_prompt();
        if prompt.generation != shown_prompt {
            shown_prompt = prompt.generation;
            println!("  system prompt, servers section:");
            for line in prompt.text.lines() {
                println!("    {line}");
            }
            servers_section = prompt.text;
        }
        if !tools.iter().any(|tool| tool.name == *wanted) {
            println!("  the model wanted {wanted}, which is not declared");
            continue;
        }
        let mut arguments: Value =
            serde_json::from_str(arguments).expect("the script's arguments are JSON");
        // The "model" read the servers section: it knows of mcp__wordcount.
        if *wanted == "codemode" && servers_section.contains("- mcp__wordcount ") {
            arguments = json!({ "code": WORDCOUNT_SCRIPT });
        }
        println!("  model calls {wanted} {arguments}");
        let options = CallOptions::default()
            .with_timeout(Duration::from_secs(30))
            .with_progress(|progress| println!("  progress: {}", progress.progress));
        match hub.call(wanted, arguments, &options) {
            Ok(result) => {
                // What the model gets back: text, images within limits, notes.
                let (server, tool) = tool_of(&hub, wanted);
                let shaped = shape_result(&server, &tool, &result, &limits);
                for block in &shaped.blocks {
                    match block {
                        ModelBlock::Text { text } => {
                            println!("  -> {}", text.replace('\n', "\n     "))
                        }
                        ModelBlock::Image { mime_type, .. } => println!("  -> [{mime_type} image]"),
                        // Audio, only with `ResultLimits::with_max_audio_bytes`.
                        other => println!("  -> {other:?}"),
                    }
                }
                if shaped.is_error {
                    println!("  (the tool reported an error; the model sees it as such)");
                }
            }
            // A transport failure becomes a message for the model, not a crash.
            Err(err) => println!("  -> error: {err}"),
        }
    }

    println!();
    for status in hub.status() {
        println!(
            "{}: {}, {} tools, for {} s",
            status.name,
            status.state.as_str(),
            status.tools.len(),
            status.since.elapsed().map_or(0, |held| held.as_secs())
        );
    }
    hub.shutdown();
}

fn names(tools: &[ModelTool]) -> String {
    tools.iter().map(|tool| tool.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// The server and tool definition behind a name (the hub's own tools have none).
fn tool_of(hub: &Hub, name: &str) -> (String, Tool) {
    match hub.tools().into_iter().find(|entry| entry.qualified_name == name) {
        Some(entry) => (entry.server, entry.tool),
        None => (
            "tether".into(),
            serde_json::from_value(json!({"name": name})).expect("a tool needs only a name"),
        ),
    }
}
