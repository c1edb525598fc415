//! [`Notes`]: where a running session's remarks go — things worth telling whoever runs it
//! that are not errors (an address kept, a port that could not be had, a feature left
//! off). A library never prints: the front end says where notes go (the CLI to stderr
//! with its own prefix, Python to a list), and without one they are dropped.

use std::sync::Arc;

/// What the front end does with a note.
type Sink = dyn Fn(&str) + Send + Sync;

/// A handle sessions tell their notes to; cloning shares where they go.
#[derive(Clone, Default)]
pub struct Notes {
    to: Option<Arc<Sink>>,
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notes")
            .field("kept", &self.to.is_some())
            .finish()
    }
}

impl Notes {
    /// Notes handed to `f`, from whichever thread the session runs on.
    pub fn to(f: impl Fn(&str) + Send + Sync + 'static) -> Notes {
        Notes {
            to: Some(Arc::new(f)),
        }
    }

    /// Tell a note.
    pub fn say(&self, note: &str) {
        if let Some(f) = &self.to {
            f(note);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn notes_reach_the_front_end_from_another_thread_or_nowhere() {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let k = kept.clone();
        let notes = Notes::to(move |n| k.lock().unwrap().push(n.to_owned()));
        let n = notes.clone();
        std::thread::spawn(move || n.say("from the session"))
            .join()
            .unwrap();
        notes.say("and here");
        assert_eq!(*kept.lock().unwrap(), ["from the session", "and here"]);
        Notes::default().say("dropped");
    }
}
