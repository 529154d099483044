//! A destination's answer read as a stream and cut at the destination's
//! `max_answer_bytes`, so a destination answering gigabytes (or an endless
//! chunked body) costs the relay at most that much memory per request.

/// The answer limit when the settings give none: room for an id and a
/// small result.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 65536;

/// The body of an answer, read up to the limit.
#[derive(Debug)]
pub struct Answer {
    /// The bytes read: the whole body, or its first `limit` bytes when cut.
    pub body: Vec<u8>,
    /// The limit, when the body was longer and reading stopped there.
    pub cut_at: Option<usize>,
}

impl Answer {
    /// The note a message about a cut answer ends with, naming the limit.
    pub fn cut_note(&self) -> String {
        match self.cut_at {
            Some(limit) => format!(
                " (the answer was longer than max_answer_bytes = {limit} and was cut there)"
            ),
            None => String::new(),
        }
    }
}

/// Reads `response`'s body up to `limit` bytes, cut as soon as it grows
/// past them (whatever Content-Length declares; the first bytes are kept
/// for the message). Dropping the response then closes the
/// connection, so the rest is never received. An error while reading is
/// returned with the bytes read before it.
pub async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Answer, (reqwest::Error, Vec<u8>)> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(None) => return Ok(Answer { body, cut_at: None }),
            Ok(Some(chunk)) if body.len() + chunk.len() > limit => {
                let room = limit - body.len();
                body.extend_from_slice(&chunk[..room]);
                return Ok(Answer {
                    body,
                    cut_at: Some(limit),
                });
            }
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Err(e) => return Err((e, body)),
        }
    }
}
