//! Reading the answer to a POSTed request: one JSON body, or an SSE
//! stream that ends with the response (resumed with `Last-Event-ID` when
//! it breaks early, never for a stateless server, whose lost answer the
//! client sends again under a new id).

use std::io::{self, BufReader, Read};
use std::time::Duration;

use ureq::http::Response;
use ureq::Body;

use super::wire::http_error;
use super::{HttpTransport, Poster, DEFAULT_RETRY, MAX_RESUMES, MAX_RETRY};
use crate::error::{CloseReason, Error};
use crate::framing::MAX_FRAME;
use crate::sync::lock;
use crate::transport::sse::SseReader;

impl HttpTransport {
    /// Reads a request's answer: one JSON body, or an SSE stream that ends
    /// with the response (resumed with `Last-Event-ID` if it breaks early).
    pub(super) fn read_answer(
        &self,
        response: &mut Response<Body>,
        id: Option<i64>,
        method: Option<&str>,
        by: Poster<'_>,
    ) -> Result<(), Error> {
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("");
        let is = |kind: &str| {
            content_type.get(..kind.len()).is_some_and(|start| start.eq_ignore_ascii_case(kind))
        };
        let (is_json, is_sse) = (is("application/json"), is("text/event-stream"));
        if is_sse {
            return self.read_stream(response, id, method, by);
        }
        self.read_body(response, status, is_json, id, method)
    }

    /// Reads an SSE response stream until it delivers the answer, resuming
    /// it (`Last-Event-ID`, at most [`MAX_RESUMES`] times) when it breaks
    /// first; a stateless server's broken stream loses the answer.
    fn read_stream(
        &self,
        response: &mut Response<Body>,
        id: Option<i64>,
        method: Option<&str>,
        by: Poster<'_>,
    ) -> Result<(), Error> {
        let mut reader = SseReader::new(BufReader::new(response.body_mut().as_reader()), MAX_FRAME);
        let mut answered = false;
        let mut outcome = self.deliver_events(&mut reader, id, &mut answered, false);
        let mut last_id = reader.last_id().map(str::to_owned);
        let mut retry = reader.retry_ms.map(Duration::from_millis);
        let mut resumes = 0;
        loop {
            if answered {
                return Ok(());
            }
            if let Err(err) = &outcome {
                if err.kind() == io::ErrorKind::InvalidData {
                    return Err(Error::Http {
                        status: None,
                        message: format!("the server sent {err}"),
                    });
                }
            }
            if self.is_closing() {
                return Ok(());
            }
            if lock(&self.state).stateless {
                // Not resumable: the caller sends the request anew.
                let method = method.unwrap_or_default().to_owned();
                return Err(Error::ResponseLost { method });
            }
            let Some(event_id) = last_id.clone() else {
                return Err(Error::Http {
                    status: None,
                    message: "the server ended the response stream without an answer".into(),
                });
            };
            if resumes == MAX_RESUMES {
                return Err(Error::Http {
                    status: None,
                    message: "the response stream kept breaking".into(),
                });
            }
            resumes += 1;
            if !self.pause(retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY), by) {
                return Ok(());
            }
            log::debug!("{}: resuming the response stream after event {event_id}", self.server);
            let mut resumed = match self.open_get(Some(&event_id), Some(self.request_ceiling), by) {
                Ok(resumed) if resumed.status().is_success() => resumed,
                Ok(mut refused) => return Err(http_error(&mut refused)),
                // Nothing listens there now (a local server that stopped):
                // a retry a moment later would find the same.
                Err(err) if super::wire::refused_here(&err, &self.target.url) => {
                    return Err(Error::Http {
                        status: None,
                        message: format!(
                            "the response stream broke, and resuming it found {}",
                            super::wire::network_words(&err)
                        ),
                    });
                }
                Err(err) => {
                    outcome = Err(io::Error::other(err.to_string()));
                    continue;
                }
            };
            let mut reader =
                SseReader::new(BufReader::new(resumed.body_mut().as_reader()), MAX_FRAME);
            outcome = self.deliver_events(&mut reader, id, &mut answered, true);
            last_id = reader.last_id().map(str::to_owned).or(last_id);
            retry = reader.retry_ms.map(Duration::from_millis).or(retry);
        }
    }

    /// Reads a JSON response body: the answer, an error that names no
    /// request (this one's), or an acceptance that promises the answer on
    /// the GET stream.
    fn read_body(
        &self,
        response: &mut Response<Body>,
        status: u16,
        is_json: bool,
        id: Option<i64>,
        method: Option<&str>,
    ) -> Result<(), Error> {
        // Sized from Content-Length when there is one: read in one go.
        let length = response
            .headers()
            .get("content-length")
            .and_then(|value| value.to_str().ok()?.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = Vec::with_capacity(length.min(MAX_FRAME) + 1);
        let read =
            response.body_mut().as_reader().take(MAX_FRAME as u64 + 1).read_to_end(&mut body);
        if let Err(err) = read {
            return Err(Error::Http {
                status: None,
                message: format!("reading the answer failed: {err}"),
            });
        }
        if body.len() > MAX_FRAME {
            return Err(Error::Disconnected(CloseReason::FrameTooLarge {
                size: body.len(),
                limit: MAX_FRAME,
            }));
        }
        let trimmed = body.trim_ascii();
        let accepted = status == 202
            || trimmed.is_empty()
            || (is_json && (trimmed == b"null" || trimmed == b"{}"));
        if accepted {
            // 202 Accepted for a request: the answer comes on the GET stream,
            // if there is one; without it (or statelessly), it never comes.
            let state = lock(&self.state);
            if state.no_get_stream || state.stateless {
                return Err(Error::Protocol(
                    "the server accepted the request without answering, and offers no stream to answer on".into(),
                ));
            }
            return Ok(());
        }
        if self.deliver_json(&body, id) || id.is_none() {
            return Ok(());
        }
        // An error that names no request is this one's (a body answers the
        // POST it came with).
        let unaddressed = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .filter(|message| message.get("id").is_none_or(serde_json::Value::is_null))
            .and_then(|mut message| {
                serde_json::from_value::<crate::jsonrpc::RpcError>(message.get_mut("error")?.take())
                    .ok()
            });
        if let Some(error) = unaddressed {
            return Err(Error::from_rpc(error));
        }
        // A JSON answer is the response or nothing: waiting on would only
        // end at the caller's timeout.
        Err(Error::Protocol(format!(
            "the server answered {} with a body that holds no response to it",
            method.unwrap_or("a request")
        )))
    }
}
