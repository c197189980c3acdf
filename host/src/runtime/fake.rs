//! A runtime for the dispatch rules' own tests: a hook is a Rust closure from the request to
//! an answer or a failure, so the rules of `session` and `points/` run without a component,
//! a process or a socket. Its deadline is the hook's `timeout_ms`, as for the real runtimes.

use super::outcome::{Cost, Meter, Run};
use super::site::Site;
use crate::failure::{Failure, FailureReason};
use crate::hook::{Answer, Request};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Respond = dyn Fn(&Request) -> Result<Answer, Failure> + Send + Sync;

/// A hook written in Rust.
#[derive(Clone)]
pub(crate) struct Fake {
    respond: Arc<Respond>,
    /// How long it takes to answer.
    delay: Duration,
}

impl Fake {
    pub fn new(
        respond: impl Fn(&Request) -> Result<Answer, Failure> + Send + Sync + 'static,
    ) -> Fake {
        Fake {
            respond: Arc::new(respond),
            delay: Duration::ZERO,
        }
    }

    /// A hook that takes `delay` to answer.
    pub fn slow(mut self, delay: Duration) -> Fake {
        self.delay = delay;
        self
    }

    pub async fn call(&self, site: Site<'_>, request: &Request<'_>) -> Run {
        let started = Instant::now();
        let timeout = site.spec.limits.timeout;
        let answer = async {
            tokio::time::sleep(self.delay).await;
            (self.respond)(request)
        };
        let result = match tokio::time::timeout(timeout, answer).await {
            Ok(result) => result,
            Err(_) => Err(Failure::new(
                FailureReason::Timeout,
                format!("passed its deadline of {} ms", timeout.as_millis()),
            )),
        };
        Run {
            result,
            meter: Meter {
                duration: started.elapsed(),
                cost: Cost::default(),
            },
            logs: Vec::new(),
        }
    }
}
