//! The serving's housekeeping, each on a thread of its own for as long as
//! the serving lasts: `serve-changes` announces the hub's tool changes to
//! the clients in front, and `serve-restarts` starts again the servers that
//! stopped and warns of those that cannot be served. Both poll the hub (each
//! quarter second) and look whether the serving ended, so that
//! its end joins them soon.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::link::Links;
use crate::hub::Hub;
use crate::ServerState;

/// How often the changes thread looks whether the serving ended: the
/// serving's end waits for it (the hub's own wait wakes each 100 ms).
const CHANGES_POLL: Duration = Duration::from_millis(50);
/// How often the restarts thread looks for servers that stopped.
const RESTART_POLL: Duration = Duration::from_millis(250);
/// The first pause before restarting a server that stopped again soon, and
/// the longest.
const RESTART_FIRST: Duration = Duration::from_secs(1);
const RESTART_CAP: Duration = Duration::from_secs(30);
/// A server up this long since its last restart starts its backoff afresh.
const RESTART_RESET: Duration = Duration::from_secs(60);
/// How often the restarts thread looks for servers that cannot be served,
/// to say so.
const SAY_POLL: Duration = Duration::from_millis(250);

/// Announces each change of the hub's tools to a downstream that takes
/// notifications, until the serving ends.
pub(super) fn announce_changes(hub: &Hub, links: &Links, ended: &AtomicBool) {
    let mut generation = hub.wait_tools_changed(u64::MAX, Duration::ZERO);
    while !ended.load(Ordering::Relaxed) {
        let now = hub.wait_tools_changed(generation, CHANGES_POLL);
        if now != generation {
            generation = now;
            links.notify("notifications/tools/list_changed", Some(&json!({})));
        }
    }
}

/// Starts again the servers that stopped (a crashed stdio server), with a
/// backoff from 1 s doubling to 30 s between restarts that come soon after
/// one another, afresh once 60 s pass without one; and says each server
/// that cannot be served (`say_failures`).
pub(super) fn keep_servers(hub: &Hub, ended: &AtomicBool) {
    let mut pause = RESTART_FIRST;
    let mut last: Option<Instant> = None;
    let mut next = Instant::now() + RESTART_POLL;
    let mut said = HashMap::new();
    let mut next_say = Instant::now();
    while !ended.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next_say {
            say_failures(hub, &mut said);
            next_say = now + SAY_POLL;
        }
        if now < next {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        if last.is_some_and(|at| now.duration_since(at) >= RESTART_RESET) {
            pause = RESTART_FIRST;
        }
        let restarted = hub.restart_dropped();
        if restarted.is_empty() {
            next = now + RESTART_POLL;
        } else {
            log::warn!("restarting {} after it stopped", restarted.join(", "));
            last = Some(now);
            next = now + pause;
            pause = (pause * 2).min(RESTART_CAP);
        }
    }
    // A failure learnt since the last look is still said: the serving may
    // end right after a sign-in failed.
    say_failures(hub, &mut said);
}

/// Warns of each server that cannot be served (an entry or a file that
/// could not be used, a start that failed, a sign-in needed, a project not
/// trusted), once for each new reason. The serving's log is all a host that
/// starts tether keeps of it, and its client sees only tools missing.
fn say_failures(hub: &Hub, said: &mut HashMap<String, String>) {
    for status in hub.status() {
        let why = match status.state {
            ServerState::Failed | ServerState::NeedsLogin => match &status.error {
                Some(error) => error.chain(),
                None => status.state.as_str().to_owned(),
            },
            ServerState::Untrusted => "not started: its project is not trusted".to_owned(),
            _ => {
                said.remove(&status.name);
                continue;
            }
        };
        if said.get(&status.name) != Some(&why) {
            log::warn!("{}: {why}", status.name);
            said.insert(status.name, why);
        }
    }
}
