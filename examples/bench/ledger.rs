//! `ledger 0 CONFIG_DIR`: the bytes a model reads to do nine multi-step
//! tasks, once with every tool declared (direct exposure) and once through
//! codemode, against real servers: the bundled `demo`, server-everything
//! (`everything`) and a word-count server on the Python SDK (`wordcount`),
//! as that folder's `mcp.json` names them.
//!
//! Both sides do each task for real and must reach the same answer.
//! Direct: the declarations of every tool (once per task, as if the model
//! read them once), then each call the model writes (name and arguments)
//! and each result shaped for it (`shape_result`: text, and an image's
//! base64). Codemode: the `codemode` tool's declaration and the servers
//! section of the system prompt, one discovery script (`searchTools`, as a
//! model that has not seen the signatures would write), and the task's
//! script; each script's text and its shaped result. The scripts are
//! written by hand as a model would write them.
//!
//! Two totals: everything read once, and what is read across turns when
//! each turn's request carries the conversation so far (one turn per call,
//! and one to answer), as a model API is called.

use serde_json::{json, Value};
use tether::{
    shape_result, CallOptions, ConfigLoader, Exposure, Hub, HubOptions, ModelBlock, ResultLimits,
    Tool, ToolResult,
};

/// What one side read and wrote.
#[derive(Default, Clone)]
struct Side {
    declarations: usize,
    calls: usize,
    results: usize,
    turns: usize,
    /// Each turn's call and result bytes, in order.
    exchanges: Vec<usize>,
}

impl Side {
    fn total(&self) -> usize {
        self.declarations + self.calls + self.results
    }

    /// The bytes read over the whole conversation when each turn's request
    /// carries everything before it (as a model API is called): one turn
    /// per call, and one more to answer.
    fn across_turns(&self) -> usize {
        let mut context = self.declarations;
        let mut read = context;
        for exchange in &self.exchanges {
            context += exchange;
            read += context;
        }
        read
    }
}

struct Task {
    name: &'static str,
    /// What the model searches for before writing its script.
    search: &'static str,
    script: &'static str,
    direct: fn(&mut Direct) -> Value,
}

pub fn ledger(args: &[String]) {
    let dir = args.first().expect("usage: bench ledger 0 CONFIG_DIR");
    let config = ConfigLoader::new().config_dir(dir).load();
    for name in ["demo", "everything", "wordcount"] {
        assert!(config.server(name).is_some(), "{dir}/mcp.json has no server {name:?}");
    }
    let with = |exposure: Exposure| {
        let mut config = config.clone();
        for server in &mut config.servers {
            server.exposure = exposure;
            server.tool_exposure.clear();
        }
        Hub::start(config, HubOptions::default())
    };
    let direct_hub = with(Exposure::Direct);
    let codemode_hub = with(Exposure::Codemode);
    let declared = |hub: &Hub| serde_json::to_string(&hub.model_tools()).unwrap().len();
    let direct_declarations = declared(&direct_hub);
    let codemode_declarations = declared(&codemode_hub) + codemode_hub.servers_prompt().text.len();
    println!(
        "declarations: direct {direct_declarations} bytes ({} tools), codemode {codemode_declarations} bytes \
         (the codemode tool, the resource tools, the servers section)",
        direct_hub.model_tools().len()
    );
    println!(
        "\n| task | calls | direct: decl + calls + results = total | codemode: decl + scripts + results = total | codemode / direct | across turns: direct, codemode, ratio |"
    );
    println!("|---|---|---|---|---|---|");
    let (mut all_direct, mut all_codemode) = (0, 0);
    let (mut turns_direct, mut turns_codemode) = (0, 0);
    for task in tasks() {
        let mut direct = Direct { hub: &direct_hub, side: Side::default() };
        direct.side.declarations = direct_declarations;
        let expected = (task.direct)(&mut direct);
        let mut codemode = Side { declarations: codemode_declarations, ..Side::default() };
        let discovery = format!("return searchTools({:?}, {{ limit: 4 }});", task.search);
        script(&codemode_hub, &mut codemode, &discovery);
        let answer = script(&codemode_hub, &mut codemode, task.script);
        assert_eq!(answer, expected, "{}: the two sides disagree", task.name);
        let side = direct.side;
        all_direct += side.total();
        all_codemode += codemode.total();
        turns_direct += side.across_turns();
        turns_codemode += codemode.across_turns();
        println!(
            "| {} | {} | {} + {} + {} = {} | {} + {} + {} = {} | {:.2} | {}, {}, {:.2} |",
            task.name,
            side.turns,
            side.declarations,
            side.calls,
            side.results,
            side.total(),
            codemode.declarations,
            codemode.calls,
            codemode.results,
            codemode.total(),
            codemode.total() as f64 / side.total() as f64,
            side.across_turns(),
            codemode.across_turns(),
            codemode.across_turns() as f64 / side.across_turns() as f64
        );
    }
    println!(
        "| all | | {all_direct} | {all_codemode} | {:.2} | {turns_direct}, {turns_codemode}, {:.2} |",
        all_codemode as f64 / all_direct as f64,
        turns_codemode as f64 / turns_direct as f64
    );
    println!(
        "{}",
        json!({"mode": "ledger", "direct": all_direct, "codemode": all_codemode,
               "directAcrossTurns": turns_direct, "codemodeAcrossTurns": turns_codemode})
    );
    direct_hub.shutdown();
    codemode_hub.shutdown();
}

/// The model calling tools one by one.
struct Direct<'a> {
    hub: &'a Hub,
    side: Side,
}

impl Direct<'_> {
    fn call(&mut self, name: &str, arguments: Value) -> ToolResult {
        let written = name.len() + arguments.to_string().len();
        self.side.calls += written;
        self.side.turns += 1;
        let result =
            self.hub.call(name, arguments, &CallOptions::default()).expect("the call answers");
        assert!(!result.is_error(), "{name}: {}", result.to_text());
        let read = shaped_bytes(self.hub, name, &result);
        self.side.results += read;
        self.side.exchanges.push(written + read);
        result
    }

    fn text(&mut self, name: &str, arguments: Value) -> String {
        self.call(name, arguments).to_text()
    }
}

/// One `codemode` call: the script the model writes, and what it reads back.
fn script(hub: &Hub, side: &mut Side, code: &str) -> Value {
    side.calls += code.len();
    side.turns += 1;
    let result = hub
        .call("codemode", json!({ "code": code }), &CallOptions::default())
        .expect("the script runs");
    assert!(!result.is_error(), "{code}\n{}", result.to_text());
    let read = shaped_bytes(hub, "codemode", &result);
    side.results += read;
    side.exchanges.push(code.len() + read);
    let text = result.raw["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// What the model reads of a result: its text blocks and notes, and each
/// image's base64.
fn shaped_bytes(hub: &Hub, name: &str, result: &ToolResult) -> usize {
    let (server, tool) = match hub.tools().into_iter().find(|entry| entry.qualified_name == name) {
        Some(entry) => (entry.server, entry.tool),
        None => {
            let tool: Tool = serde_json::from_value(json!({ "name": name })).unwrap();
            ("tether".to_owned(), tool)
        }
    };
    let shaped = shape_result(&server, &tool, result, &ResultLimits::default());
    shaped
        .blocks
        .iter()
        .map(|block| match block {
            ModelBlock::Text { text } => text.len(),
            ModelBlock::Image { data, .. } | ModelBlock::Audio { data, .. } => data.len(),
            _ => 0,
        })
        .sum()
}

/// The last number in a text: "The sum of 2 and 40 is 42." → 42.
fn last_number(text: &str) -> f64 {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .filter_map(|word| word.trim_end_matches('.').parse::<f64>().ok())
        .next_back()
        .expect("a number")
}

const SENTENCES: [&str; 5] = [
    "the quick brown fox",
    "jumps over the lazy dog",
    "and runs away",
    "into the deep dark forest at night",
    "never to be seen again",
];

fn tasks() -> Vec<Task> {
    vec![
        Task {
            name: "longest of three texts (demo, 3)",
            search: "count words",
            script: r#"const texts = ["to be or not to be", "the quick brown fox jumps", "hello world"];
const counted = await Promise.all(texts.map(text => tools.mcp__demo__count_words({ text })));
const words = counted.map(r => r.structuredContent.words);
return texts[words.indexOf(Math.max(...words))];"#,
            direct: |model| {
                let texts = ["to be or not to be", "the quick brown fox jumps", "hello world"];
                let words: Vec<u64> = texts
                    .iter()
                    .map(|text| {
                        let result = model.call("mcp__demo__count_words", json!({ "text": text }));
                        result.raw["structuredContent"]["words"].as_u64().unwrap()
                    })
                    .collect();
                let most = words.iter().max().unwrap();
                json!(texts[words.iter().position(|w| w == most).unwrap()])
            },
        },
        Task {
            name: "sum of 1..6 by chained get-sum (everything, 5)",
            search: "add two numbers",
            script: r#"let total = 1;
for (const n of [2, 3, 4, 5, 6]) {
  const r = await tools["mcp__everything__get-sum"]({ a: total, b: n });
  total = Number(r.content[0].text.match(/(-?[\d.]+)\.?$/)[1]);
}
return total;"#,
            direct: |model| {
                let mut total = 1.0;
                for n in [2, 3, 4, 5, 6] {
                    let text = model.text("mcp__everything__get-sum", json!({"a": total, "b": n}));
                    total = last_number(&text);
                }
                // Whole, as JavaScript writes it.
                json!(total as i64)
            },
        },
        Task {
            name: "echo four messages, count each echo's words (everything + demo, 8)",
            search: "echo a message",
            script: r#"const messages = ["one small step", "for a man", "one giant leap", "for mankind"];
const counts = [];
for (const message of messages) {
  const echoed = (await tools.mcp__everything__echo({ message })).content[0].text;
  const counted = await tools.mcp__demo__count_words({ text: echoed });
  counts.push(counted.structuredContent.words);
}
return counts;"#,
            direct: |model| {
                let messages = ["one small step", "for a man", "one giant leap", "for mankind"];
                let counts: Vec<u64> = messages
                    .iter()
                    .map(|message| {
                        let echoed =
                            model.text("mcp__everything__echo", json!({ "message": message }));
                        let counted =
                            model.call("mcp__demo__count_words", json!({ "text": echoed }));
                        counted.raw["structuredContent"]["words"].as_u64().unwrap()
                    })
                    .collect();
                json!(counts)
            },
        },
        Task {
            name: "the warmest of three cities (everything, 3)",
            search: "weather",
            script: r#"const cities = ["New York", "Chicago", "Los Angeles"];
const weather = await Promise.all(cities.map(location => tools["mcp__everything__get-structured-content"]({ location })));
const temperatures = weather.map(r => r.structuredContent.temperature);
return cities[temperatures.indexOf(Math.max(...temperatures))];"#,
            direct: |model| {
                let cities = ["New York", "Chicago", "Los Angeles"];
                let temperatures: Vec<f64> = cities
                    .iter()
                    .map(|city| {
                        let result = model.call(
                            "mcp__everything__get-structured-content",
                            json!({ "location": city }),
                        );
                        result.raw["structuredContent"]["temperature"].as_f64().unwrap()
                    })
                    .collect();
                let warmest = temperatures.iter().cloned().fold(f64::MIN, f64::max);
                json!(cities[temperatures.iter().position(|t| *t == warmest).unwrap()])
            },
        },
        Task {
            name: "total words of five sentences (wordcount, Python SDK, 5)",
            search: "word count",
            script: r#"const sentences = ["the quick brown fox", "jumps over the lazy dog", "and runs away",
  "into the deep dark forest at night", "never to be seen again"];
let total = 0;
for (const text of sentences) total += Number((await tools.mcp__wordcount__word_count({ text })).content[0].text);
return total;"#,
            direct: |model| {
                let total: u64 = SENTENCES
                    .iter()
                    .map(|text| {
                        let text =
                            model.text("mcp__wordcount__word_count", json!({ "text": text }));
                        text.trim().parse::<u64>().unwrap()
                    })
                    .sum();
                json!(total)
            },
        },
        Task {
            name: "five resource links, each read, their sizes (everything, 6)",
            search: "resource links",
            script: r#"const links = await tools["mcp__everything__get-resource-links"]({ count: 5 });
const uris = links.content.filter(b => b.type === "resource_link").map(b => b.uri);
const read = await Promise.all(uris.map(uri => readResource("everything", uri)));
return read.map(r => (r.contents[0].text || r.contents[0].blob || "").length);"#,
            direct: |model| {
                let links = model.call("mcp__everything__get-resource-links", json!({"count": 5}));
                let uris: Vec<String> = links.raw["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|block| block["type"] == "resource_link")
                    .map(|block| block["uri"].as_str().unwrap().to_owned())
                    .collect();
                let sizes: Vec<usize> = uris
                    .iter()
                    .map(|uri| {
                        let read = model.call(
                            "read_mcp_resource",
                            json!({ "server": "everything", "uri": uri }),
                        );
                        let item = &read.raw["content"][0]["resource"];
                        item["text"].as_str().or(item["blob"].as_str()).unwrap_or("").len()
                    })
                    .collect();
                json!(sizes)
            },
        },
        Task {
            name: "an image's type and a message's priority (everything, 3)",
            search: "image",
            script: r#"const image = await tools["mcp__everything__get-tiny-image"]({});
const note = await tools["mcp__everything__get-annotated-message"]({ messageType: "success" });
const mimeType = image.content.find(b => b.type === "image").mimeType;
const echoed = await tools.mcp__everything__echo({ message: mimeType });
return [echoed.content[0].text, note.content[0].annotations.priority];"#,
            direct: |model| {
                let image = model.call("mcp__everything__get-tiny-image", json!({}));
                let note = model.call(
                    "mcp__everything__get-annotated-message",
                    json!({"messageType": "success"}),
                );
                let mime = image.raw["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|block| block["type"] == "image")
                    .map(|block| block["mimeType"].as_str().unwrap().to_owned())
                    .unwrap();
                let echoed = model.text("mcp__everything__echo", json!({ "message": mime }));
                json!([echoed, note.raw["content"][0]["annotations"]["priority"]])
            },
        },
        Task {
            name: "which of ten texts have more than three words (demo, 10)",
            search: "count words",
            script: r#"const texts = ["a b", "a b c d", "one", "the cat sat on the mat", "x y z",
  "to be or not", "hi there", "four words right here", "no", "a very long sentence indeed"];
const long = [];
for (const text of texts) {
  if ((await tools.mcp__demo__count_words({ text })).structuredContent.words > 3) long.push(text);
}
return long;"#,
            direct: |model| {
                let texts = [
                    "a b",
                    "a b c d",
                    "one",
                    "the cat sat on the mat",
                    "x y z",
                    "to be or not",
                    "hi there",
                    "four words right here",
                    "no",
                    "a very long sentence indeed",
                ];
                let long: Vec<&str> = texts
                    .iter()
                    .filter(|text| {
                        let result = model.call("mcp__demo__count_words", json!({ "text": text }));
                        result.raw["structuredContent"]["words"].as_u64().unwrap() > 3
                    })
                    .copied()
                    .collect();
                json!(long)
            },
        },
        Task {
            name: "the server's HOME, echoed and counted (everything + demo, 3)",
            search: "environment variables",
            script: r#"const env = JSON.parse((await tools["mcp__everything__get-env"]({})).content[0].text);
const echoed = (await tools.mcp__everything__echo({ message: env.HOME })).content[0].text;
return (await tools.mcp__demo__count_words({ text: echoed })).structuredContent;"#,
            direct: |model| {
                let env: Value =
                    serde_json::from_str(&model.text("mcp__everything__get-env", json!({})))
                        .unwrap();
                let echoed = model.text("mcp__everything__echo", json!({ "message": env["HOME"] }));
                let counted = model.call("mcp__demo__count_words", json!({ "text": echoed }));
                counted.raw["structuredContent"].clone()
            },
        },
    ]
}
