//! The lists a server offers (tools, resources, templates, prompts), read
//! page by page to the end, and bounded: a server that pages forever, or
//! whose list outgrows what a host can use, is cut off and said to be.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::{json, Value};

use super::{cache, param_headers, CallOptions, Client, StatelessSession};
use crate::error::Error;
use crate::protocol::{Prompt, Resource, ResourceTemplate, Tool};

/// A server that pages forever is cut off here.
const MAX_PAGES: usize = 1000;
/// The most items a list keeps (tools, resources, templates or prompts);
/// past it the list is cut, and said.
const MAX_LIST_ITEMS: usize = 10_000;
/// The most a list's items may weigh, as JSON text (about: see
/// `json_size`); past it the list is cut, and said.
const MAX_LIST_BYTES: usize = 32 * 1024 * 1024;

/// About how long `value` is as JSON text: its strings' lengths and a few
/// bytes per value, without writing it out.
pub(super) fn json_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items.iter().map(json_size).sum::<usize>() + 2 + items.len(),
        Value::Object(members) => {
            members.iter().map(|(key, value)| key.len() + 4 + json_size(value)).sum::<usize>() + 2
        }
    }
}

impl Client {
    /// Lists every tool, following `nextCursor` to the end.
    ///
    /// # Errors
    /// Request errors, a malformed page, a repeated cursor, or more than
    /// 1000 pages.
    pub fn list_tools(&self, options: &CallOptions) -> Result<Vec<Tool>, Error> {
        let pages = self.list_all("tools/list", "tools", options)?;
        let tools = pages
            .into_iter()
            .map(|tool| {
                serde_json::from_value(tool)
                    .map_err(|err| Error::Protocol(format!("bad tool in tools/list: {err}")))
            })
            .collect::<Result<Vec<Tool>, Error>>()?;
        self.listed.listed(&tools);
        if !self.stateless_http() {
            return Ok(tools);
        }
        // A stateless HTTP server's tools may ask for parameters in headers;
        // one whose annotations break the rules is left out.
        let mut annotated = HashMap::new();
        let mut valid = Vec::with_capacity(tools.len());
        let mut left_out = Vec::new();
        for tool in tools {
            match param_headers::annotations(&tool.input_schema) {
                Ok(headers) => {
                    if !headers.is_empty() {
                        annotated.insert(tool.name.clone(), headers);
                    }
                    valid.push(tool);
                }
                Err(why) => {
                    log::warn!("{}: tool {:?} left out: {why}", self.router.server(), tool.name);
                    left_out.push(format!("tool {:?} left out: {why}", tool.name));
                }
            }
        }
        if let Some(session) = self.stateless_session() {
            session.listed(annotated, left_out);
        }
        Ok(valid)
    }

    /// Why each tool the last `tools/list` left out was left out (for the
    /// hub's status warnings).
    pub(crate) fn tools_left_out(&self) -> Vec<String> {
        self.stateless_session().map(StatelessSession::tools_left_out).unwrap_or_default()
    }

    /// Runs a paginated list request and gathers the `key` arrays of all pages.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_all(
        &self,
        method: &str,
        key: &str,
        options: &CallOptions,
    ) -> Result<Vec<Value>, Error> {
        if let Some(kept) = self.router.stateless().lists().get(method) {
            return Ok(kept);
        }
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        // A stateless server's list may be kept for its pages' shortest ttlMs.
        let mut keep_for = self.stateless_session().map(|_| Duration::MAX);
        let changes = self.router.stateless().lists().changes();
        let done = |items: Vec<Value>, keep_for: Option<Duration>| {
            if let Some(ttl) = keep_for {
                self.router.stateless().lists().keep(method, &items, ttl, changes);
            }
            Ok(items)
        };
        let mut weight = 0usize;
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map(|cursor| json!({"cursor": cursor}));
            let mut page = self.request(method, params, options)?;
            keep_for = keep_for.zip(cache::page_ttl(&page)).map(|(kept, page)| kept.min(page));
            let Some(Value::Array(page_items)) = page.get_mut(key).map(Value::take) else {
                return Err(Error::Protocol(format!("{method} result has no {key:?} array")));
            };
            for item in page_items {
                weight = weight.saturating_add(json_size(&item));
                if items.len() == MAX_LIST_ITEMS || weight > MAX_LIST_BYTES {
                    log::warn!(
                        "{}: {method}: the list is cut at {} items ({} MiB); tether keeps at most \
                         {MAX_LIST_ITEMS} items and {} MiB",
                        self.router.server(),
                        items.len(),
                        (weight - json_size(&item)) / (1024 * 1024),
                        MAX_LIST_BYTES / (1024 * 1024),
                    );
                    return done(items, keep_for);
                }
                items.push(item);
            }
            match page.get("nextCursor") {
                None | Some(Value::Null) => return done(items, keep_for),
                // Some servers end the list with an empty cursor.
                Some(Value::String(next)) if next.is_empty() => return done(items, keep_for),
                Some(Value::String(next)) => {
                    if !seen_cursors.insert(next.clone()) {
                        return Err(Error::Protocol(format!(
                            "{method}: the server repeated the cursor {next:?}"
                        )));
                    }
                    cursor = Some(next.clone());
                }
                Some(other) => {
                    return Err(Error::Protocol(format!(
                        "{method}: nextCursor is not a string: {other}"
                    )))
                }
            }
        }
        Err(Error::Protocol(format!(
            "{method}: more than {MAX_PAGES} pages ({} items so far); tether stops there, as \
             with a server that pages forever (a long list needs bigger pages)",
            items.len()
        )))
    }

    /// Lists every resource, following `nextCursor` to the end.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_resources(&self, options: &CallOptions) -> Result<Vec<Resource>, Error> {
        self.list_typed("resources/list", "resources", options)
    }

    /// Lists every resource template.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_resource_templates(
        &self,
        options: &CallOptions,
    ) -> Result<Vec<ResourceTemplate>, Error> {
        self.list_typed("resources/templates/list", "resourceTemplates", options)
    }

    /// Lists every prompt.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_prompts(&self, options: &CallOptions) -> Result<Vec<Prompt>, Error> {
        self.list_typed("prompts/list", "prompts", options)
    }

    fn list_typed<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        key: &str,
        options: &CallOptions,
    ) -> Result<Vec<T>, Error> {
        self.list_all(method, key, options)?
            .into_iter()
            .map(|item| {
                serde_json::from_value(item)
                    .map_err(|err| Error::Protocol(format!("bad item in {method}: {err}")))
            })
            .collect()
    }
}
