//! The library's error type.

use std::fmt;
use std::path::PathBuf;

/// An error at the library boundary.
///
/// Errors a user can cause (a bad manifest, a bad component) are [`Error::Invalid`]: every
/// problem found, each naming the file, the field and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The plugin directory has problems; nothing was loaded.
    #[error("{}", ProblemList(.problems))]
    Invalid {
        /// Every problem found, in directory order.
        problems: Vec<Problem>,
    },
    /// The plugin directory itself could not be opened.
    #[error("cannot open plugin directory {}: {source}", .path.display())]
    Directory {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The WebAssembly engine could not be configured.
    #[error("cannot configure the WebAssembly engine: {message}")]
    Engine {
        /// What went wrong.
        message: String,
    },
}

/// One problem with a plugin: where it is, what is wrong, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file at fault (a `plugin.toml` or a component), or the plugin folder.
    pub path: PathBuf,
    /// The field at fault, as a TOML path (`hooks[0].capability`), when there is one.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is an obvious fix.
    pub fix: Option<String>,
}

impl Problem {
    pub(crate) fn new(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Problem {
            path: path.into(),
            field: None,
            message: message.into(),
            fix: None,
        }
    }

    pub(crate) fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub(crate) fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(field) = &self.field {
            write!(f, ": `{field}`")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, " (fix: {fix})")?;
        }
        Ok(())
    }
}

struct ProblemList<'a>(&'a [Problem]);

impl fmt::Display for ProblemList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "{n} problem{} in the plugin directory:",
            if n == 1 { "" } else { "s" }
        )?;
        for problem in self.0 {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}
