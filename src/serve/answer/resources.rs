//! Resources and prompts as the client in front sees them: listed with
//! their servers named, and each read, prompt, completion and subscription
//! asked of the server it belongs to (the one that listed the URI or the
//! template, the one a `SERVER__PROMPT` names).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{json, Value};

use super::upstream::{log_errors, upstream_error};
use super::{rpc, split_qualified, without_envelope, Answerer, Asked, INVALID_PARAMS, LIST_WAIT};
use crate::client::{CallOptions, PassedResult};
use crate::error::Error;
use crate::jsonrpc::RpcError;
use crate::serve::rounds;
use crate::sync::lock;

impl Answerer<'_> {
    pub(super) fn resources(&self) -> Result<Value, RpcError> {
        self.hub.wait_started_for(LIST_WAIT);
        let (offered, errors) = self.hub.resources();
        log_errors(&errors);
        let mut servers = HashMap::new();
        let mut listed = Vec::with_capacity(offered.len());
        for resource in offered {
            if self.keeps(&resource.server) {
                servers.insert(resource.item.uri.clone(), resource.server.clone());
                listed.push(serde_json::to_value(&resource.item).unwrap_or_default());
            }
        }
        *lock(&self.resource_servers) = servers;
        Ok(json!({"resources": listed}))
    }

    pub(super) fn templates(&self) -> Result<Value, RpcError> {
        let (offered, errors) = self.hub.resource_templates();
        log_errors(&errors);
        let listed: Vec<Value> = offered
            .into_iter()
            .filter(|template| self.keeps(&template.server))
            .map(|template| serde_json::to_value(&template.item).unwrap_or_default())
            .collect();
        Ok(json!({"resourceTemplates": listed}))
    }

    /// True for a server this serving includes.
    fn keeps(&self, server: &str) -> bool {
        self.options
            .passthrough
            .as_deref()
            .is_none_or(|only| crate::config::Config::same_name(server, only))
    }

    /// A resource read, from the server the URI belongs to; for a
    /// handshake client (`passing`) the server's result as it wrote it.
    pub(super) fn read(&self, asked: &Asked<'_>, passing: bool) -> Result<PassedResult, RpcError> {
        let params = asked.params;
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return Err(rpc(INVALID_PARAMS, "resources/read needs a \"uri\"".into()));
        };
        let server = match self.options.passthrough.clone() {
            Some(server) => server,
            None => self.server_of_resource(uri)?,
        };
        rounds::note_server(&server);
        let options = asked.options(&server);
        let upstream = |err: Error| upstream_error(self.hub, &server, &err);
        if passing {
            let asked = json!({"uri": uri});
            if let Some(passed) = self
                .hub
                .pass_request(&server, "resources/read", &asked, &options)
                .map_err(upstream)?
            {
                return Ok(passed);
            }
        }
        let contents = self.hub.read_resource(&server, uri, &options).map_err(upstream)?;
        Ok(PassedResult::Value(json!({"contents": contents})))
    }

    /// The server a URI belongs to: the one that listed it, else the one
    /// whose template it fits, else the only one that offers resources.
    fn server_of_resource(&self, uri: &str) -> Result<String, RpcError> {
        if lock(&self.resource_servers).is_empty() {
            let _ = self.resources();
        }
        if let Some(server) = lock(&self.resource_servers).get(uri) {
            return Ok(server.clone());
        }
        let (templates, _) = self.hub.resource_templates();
        let fitting = templates.iter().find(|template| {
            let fixed = template.item.uri_template.split('{').next().unwrap_or("");
            !fixed.is_empty() && uri.starts_with(fixed)
        });
        if let Some(template) = fitting {
            return Ok(template.server.clone());
        }
        let mut offering: Vec<String> = lock(&self.resource_servers).values().cloned().collect();
        offering.extend(templates.iter().map(|template| template.server.clone()));
        offering.sort();
        offering.dedup();
        match offering.as_slice() {
            [only] => Ok(only.clone()),
            _ => Err(rpc(-32002, format!("no server tether serves lists the resource {uri}"))),
        }
    }

    pub(super) fn prompts(&self) -> Result<Value, RpcError> {
        self.hub.wait_started_for(LIST_WAIT);
        let (offered, errors) = self.hub.prompts();
        log_errors(&errors);
        let listed: Vec<Value> = offered
            .into_iter()
            .filter(|prompt| self.keeps(&prompt.server))
            .map(|prompt| {
                let mut value = serde_json::to_value(&prompt.item).unwrap_or_default();
                if self.options.passthrough.is_none() {
                    value["name"] = json!(format!("{}__{}", prompt.server, prompt.item.name));
                }
                value
            })
            .collect();
        Ok(json!({"prompts": listed}))
    }

    /// A completion, asked of the server its reference names: a prompt's
    /// (`SERVER__PROMPT`, sent on with the server's own name for it), or a
    /// resource template's (the server that lists it).
    pub(super) fn complete(&self, params: &Value) -> Result<Value, RpcError> {
        let reference = params.get("ref").unwrap_or(&Value::Null);
        let mut asked = without_envelope(Some(params)).map(Cow::into_owned).unwrap_or_default();
        let server = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference.get("name").and_then(Value::as_str).unwrap_or_default();
                let (server, prompt) = self.split_prompt(name)?;
                asked["ref"]["name"] = json!(prompt);
                server
            }
            Some("ref/resource") => {
                let uri = reference.get("uri").and_then(Value::as_str).unwrap_or_default();
                self.server_of_resource(uri)?
            }
            _ => {
                let why = "completion/complete needs a \"ref\" to a prompt or a resource";
                return Err(rpc(INVALID_PARAMS, why.into()));
            }
        };
        self.ask_server(&server, "completion/complete", asked)
    }

    /// A subscription to a resource (or its end), asked of the server the
    /// URI belongs to; its updates reach every client (`host.rs`).
    pub(super) fn subscription(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return Err(rpc(INVALID_PARAMS, format!("{method} needs a \"uri\"")));
        };
        let server = self.server_of_resource(uri)?;
        self.ask_server(&server, method, json!({"uri": uri}))
    }

    /// `method` asked of `server` as it is; its failure is named.
    fn ask_server(&self, server: &str, method: &str, params: Value) -> Result<Value, RpcError> {
        let upstream = |err: Error| upstream_error(self.hub, server, &err);
        let client = self.hub.client(server).map_err(upstream)?;
        client.request(method, Some(params), &CallOptions::default()).map_err(upstream)
    }

    /// A prompt, from the server its name says; for a handshake client
    /// (`passing`) the server's result as it wrote it.
    pub(super) fn prompt(
        &self,
        asked: &Asked<'_>,
        passing: bool,
    ) -> Result<PassedResult, RpcError> {
        let params = asked.params;
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(rpc(INVALID_PARAMS, "prompts/get needs a \"name\"".into()));
        };
        let arguments = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
        let (server, prompt) = match self.options.passthrough.clone() {
            Some(server) => (server, name.to_owned()),
            None => self.split_prompt(name)?,
        };
        rounds::note_server(&server);
        let options = asked.options(&server);
        let upstream = |err: Error| upstream_error(self.hub, &server, &err);
        if passing {
            let asked = json!({"name": prompt, "arguments": arguments});
            if let Some(passed) =
                self.hub.pass_request(&server, "prompts/get", &asked, &options).map_err(upstream)?
            {
                return Ok(passed);
            }
        }
        let result =
            self.hub.get_prompt(&server, &prompt, arguments, &options).map_err(upstream)?;
        Ok(PassedResult::Value(serde_json::to_value(result).unwrap_or_default()))
    }

    /// `SERVER__PROMPT` as the server and its prompt.
    fn split_prompt(&self, name: &str) -> Result<(String, String), RpcError> {
        let servers: Vec<String> =
            self.hub.status().into_iter().map(|status| status.name).collect();
        split_qualified(name, &servers)
            .ok_or_else(|| rpc(INVALID_PARAMS, format!("unknown prompt {name:?}")))
    }
}
