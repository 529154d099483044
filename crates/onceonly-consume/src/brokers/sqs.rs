//! Amazon SQS (aws-sdk-sqs).
//!
//! Redelivery is the queue's `VisibilityTimeout`; a `RedrivePolicy`'s
//! `maxReceiveCount` limits the deliveries. Ack is DeleteMessage, a
//! hand-back and progress are ChangeMessageVisibility (for the delay; for
//! the queue's full timeout again), and a poison message is sent to the
//! dead-letter queue with its reason in the `onceonly-dead-reason`
//! attribute, then deleted. The dead-letter queue is the one given, or the
//! RedrivePolicy's target; without either the consumer refuses to start.

use std::collections::HashMap;
use std::time::Duration;

use aws_config::environment::EnvironmentVariableRegionProvider;
use aws_config::meta::region::RegionProviderChain;
use aws_config::BehaviorVersion;
use aws_sdk_sqs::config::Region;
use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName};
use aws_sdk_sqs::Client;

/// The SDK this adapter uses, for callers that need its types.
pub use aws_sdk_sqs;

use crate::broker::{Broker, Message, Publish, Redelivery};
use crate::error::{Error, Result};

/// The message attribute that carries a dead letter's reason.
pub const DEAD_REASON: &str = "onceonly-dead-reason";

/// The longest visibility SQS accepts (12 hours).
const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);

/// An SQS queue.
pub struct SqsBroker {
    client: Client,
    queue_url: String,
    dead_letter_url: String,
    visibility: Duration,
    source: String,
}

/// A message received from SQS.
pub struct SqsMessage {
    body: String,
    receipt: String,
    id: String,
    /// Each message attribute's text, or why it cannot carry a key.
    attributes: HashMap<String, std::result::Result<String, String>>,
    receive_count: u64,
}

impl Message for SqsMessage {
    fn body(&self) -> &[u8] {
        self.body.as_bytes()
    }

    fn header(&self, name: &str) -> Option<String> {
        self.attributes.get(name)?.clone().ok()
    }

    fn header_unusable(&self, name: &str) -> Option<String> {
        self.attributes.get(name)?.clone().err()
    }

    fn id(&self) -> String {
        self.id.clone()
    }

    fn deliveries(&self) -> u64 {
        self.receive_count
    }
}

fn failed<E>(what: impl Into<String>, e: E) -> Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    Error::broker(what, DisplayErrorContext(e).to_string())
}

/// An SQS client from the usual AWS settings (environment, profile), on
/// `endpoint` when given (an emulator such as moto). The region comes from
/// AWS_REGION (or AWS_DEFAULT_REGION), else us-east-1: the instance
/// metadata service is not asked, so a machine outside AWS starts at once.
pub async fn client(endpoint: Option<&str>) -> Client {
    let region = RegionProviderChain::first_try(EnvironmentVariableRegionProvider::new())
        .or_else(Region::new("us-east-1"));
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).region(region);
    if let Some(url) = endpoint {
        loader = loader.endpoint_url(url);
    }
    Client::new(&loader.load().await)
}

/// Creates a queue named `name` with `visibility` and returns its URL.
pub async fn create_queue(client: &Client, name: &str, visibility: Duration) -> Result<String> {
    let out = client
        .create_queue()
        .queue_name(name)
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility.as_secs().to_string(),
        )
        .send()
        .await
        .map_err(|e| failed(format!("creating SQS queue {name}"), e))?;
    out.queue_url()
        .map(str::to_owned)
        .ok_or_else(|| Error::Invalid(format!("SQS created queue {name} without a URL")))
}

/// Sends `body` to the queue at `queue_url`.
pub async fn send(client: &Client, queue_url: &str, body: String) -> Result<()> {
    client
        .send_message()
        .queue_url(queue_url)
        .message_body(body)
        .send()
        .await
        .map_err(|e| failed(format!("sending to SQS queue {queue_url}"), e))?;
    Ok(())
}

/// The queue's redelivery settings: VisibilityTimeout, and the
/// RedrivePolicy's maxReceiveCount when it has one.
pub async fn redelivery_of(client: &Client, queue_url: &str) -> Result<Redelivery> {
    let source = format!("SQS queue {queue_url}");
    let attributes = queue_attributes(client, queue_url).await?;
    Ok(Redelivery {
        timeout: visibility(&attributes, &source)?,
        max_deliveries: redrive(&attributes, &source)?.map(|(_, max)| max),
        source,
        timeout_name: "VisibilityTimeout",
        limit_name: "maxReceiveCount",
    })
}

impl SqsBroker {
    /// The queue at `queue_url`; poison goes to `dead_letter_url`, or to
    /// the queue's RedrivePolicy target when `None`.
    pub async fn new(
        client: Client,
        queue_url: &str,
        dead_letter_url: Option<&str>,
    ) -> Result<Self> {
        let source = format!("SQS queue {queue_url}");
        let attributes = queue_attributes(&client, queue_url).await?;
        let visibility = visibility(&attributes, &source)?;
        let dead_letter_url = match dead_letter_url {
            Some(url) => url.to_owned(),
            None => match redrive(&attributes, &source)? {
                Some((arn, _)) => dead_letter_by_arn(&client, &arn).await?,
                None => {
                    return Err(Error::Invalid(format!(
                        "{source} has no dead-letter queue for poison messages: give one (--dead-letter-queue URL) or set the queue's RedrivePolicy"
                    )))
                }
            },
        };
        Ok(Self {
            client,
            queue_url: queue_url.to_owned(),
            dead_letter_url,
            visibility,
            source,
        })
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Where poison messages go.
    pub fn dead_letter_url(&self) -> &str {
        &self.dead_letter_url
    }

    async fn change_visibility(
        &self,
        message: &SqsMessage,
        for_: Duration,
        what: &str,
    ) -> Result<()> {
        let secs = for_.min(MAX_VISIBILITY).as_secs_f64().ceil() as i32;
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(&message.receipt)
            .visibility_timeout(secs)
            .send()
            .await
            .map_err(|e| failed(format!("{what} on {}", self.source), e))?;
        Ok(())
    }
}

async fn queue_attributes(
    client: &Client,
    queue_url: &str,
) -> Result<HashMap<QueueAttributeName, String>> {
    let out = client
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::VisibilityTimeout)
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .send()
        .await
        .map_err(|e| {
            failed(
                format!("reading the attributes of SQS queue {queue_url}"),
                e,
            )
        })?;
    Ok(out.attributes().cloned().unwrap_or_default())
}

fn visibility(attributes: &HashMap<QueueAttributeName, String>, source: &str) -> Result<Duration> {
    let text = attributes
        .get(&QueueAttributeName::VisibilityTimeout)
        .ok_or_else(|| Error::Invalid(format!("{source} reports no VisibilityTimeout")))?;
    let secs: u64 = text.parse().map_err(|_| {
        Error::Invalid(format!(
            "{source}: VisibilityTimeout {text:?} is not whole seconds"
        ))
    })?;
    Ok(Duration::from_secs(secs))
}

/// The RedrivePolicy's dead-letter ARN and maxReceiveCount, when set.
fn redrive(
    attributes: &HashMap<QueueAttributeName, String>,
    source: &str,
) -> Result<Option<(String, u64)>> {
    let Some(text) = attributes.get(&QueueAttributeName::RedrivePolicy) else {
        return Ok(None);
    };
    let bad = || {
        Error::Invalid(format!(
            "{source}: RedrivePolicy {text:?} is not understood"
        ))
    };
    let policy: serde_json::Value = serde_json::from_str(text).map_err(|_| bad())?;
    let arn = policy["deadLetterTargetArn"].as_str().ok_or_else(bad)?;
    let max = match &policy["maxReceiveCount"] {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(bad)?;
    Ok(Some((arn.to_owned(), max)))
}

async fn dead_letter_by_arn(client: &Client, arn: &str) -> Result<String> {
    let name = arn.rsplit(':').next().unwrap_or(arn);
    let out = client
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
        .map_err(|e| failed(format!("finding the dead-letter queue {arn}"), e))?;
    out.queue_url()
        .map(str::to_owned)
        .ok_or_else(|| Error::Invalid(format!("SQS gave no URL for the dead-letter queue {arn}")))
}

impl Broker for SqsBroker {
    type Message = SqsMessage;

    fn name(&self) -> &'static str {
        "sqs"
    }

    async fn redelivery(&self) -> Result<Redelivery> {
        redelivery_of(&self.client, &self.queue_url).await
    }

    async fn receive(&self, max: usize) -> Result<Vec<SqsMessage>> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .wait_time_seconds(1)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|e| failed(format!("receiving from {}", self.source), e))?;
        Ok(out
            .messages()
            .iter()
            .filter_map(|m| {
                let attributes = m
                    .message_attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| {
                                let text =
                                    super::sqs_attribute::key_text(v.data_type(), v.string_value());
                                (k.clone(), text)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let receive_count = m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1);
                Some(SqsMessage {
                    body: m.body().unwrap_or_default().to_owned(),
                    receipt: m.receipt_handle()?.to_owned(),
                    id: m.message_id().unwrap_or("?").to_owned(),
                    attributes,
                    receive_count,
                })
            })
            .collect())
    }

    async fn ack(&self, message: &SqsMessage) -> Result<()> {
        self.client
            .delete_message()
            .queue_url(&self.queue_url)
            .receipt_handle(&message.receipt)
            .send()
            .await
            .map_err(|e| failed(format!("deleting a message from {}", self.source), e))?;
        Ok(())
    }

    async fn hand_back(&self, message: &SqsMessage, delay: Duration) -> Result<()> {
        self.change_visibility(message, delay, "handing a message back")
            .await
    }

    async fn dead_letter(&self, message: &SqsMessage, reason: &str) -> Result<()> {
        let attribute = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(reason)
            .build()
            .map_err(|e| failed("building the dead-letter reason attribute", e))?;
        self.client
            .send_message()
            .queue_url(&self.dead_letter_url)
            .message_body(message.body.clone())
            .message_attributes(DEAD_REASON, attribute)
            .send()
            .await
            .map_err(|e| {
                failed(
                    format!("sending to the dead-letter queue {}", self.dead_letter_url),
                    e,
                )
            })?;
        self.ack(message).await
    }

    async fn progress(&self, message: &SqsMessage) -> Result<()> {
        self.change_visibility(message, self.visibility, "extending the visibility")
            .await
    }
}

impl Publish for SqsBroker {
    async fn publish(&self, body: Vec<u8>) -> Result<()> {
        let body = String::from_utf8(body)
            .map_err(|_| Error::Invalid("an SQS message body must be UTF-8".into()))?;
        send(&self.client, &self.queue_url, body).await
    }

    async fn backlog(&self) -> Result<u64> {
        let counts = [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
            QueueAttributeName::ApproximateNumberOfMessagesDelayed,
        ];
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.queue_url)
            .set_attribute_names(Some(counts.to_vec()))
            .send()
            .await
            .map_err(|e| failed(format!("reading the message counts of {}", self.source), e))?;
        let attributes = out.attributes().cloned().unwrap_or_default();
        let mut total = 0;
        for name in counts {
            let text = attributes.get(&name).map_or("0", String::as_str);
            total += text.parse::<u64>().map_err(|_| {
                Error::Invalid(format!("{} reports {name} = {text:?}", self.source))
            })?;
        }
        // Approximate on AWS (the replay waits for several zero readings);
        // exact on moto.
        Ok(total)
    }
}
