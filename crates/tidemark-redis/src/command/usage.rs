//! A command's usage line (`key WINDOW ms [EPSILON e]`) read into the argument tree that
//! `COMMAND DOCS` shows and `redis-cli` draws its hints from, and the arity Redis checks.
//!
//! The grammar is the one Redis's own documentation writes:
//!
//! - `name` (lower case): an argument; its type follows from its name (`key`, `dest`: a key;
//!   `ms`, `n`, `k`, `p`, `bits`, `count`, `schema`: an integer; `e`, `d`, `phi`, `r`,
//!   `alpha`, `q`, `value`: a double; anything else, `time` included since it may be `*`, a
//!   string);
//! - `WORD name`: the token `WORD` and its value; `WORD` alone: a pure token;
//! - `[ … ]`: optional; `[ a | b ]`: one of them, optional;
//! - `x [x ...]`: `x` repeats; `a [b] [a [b] ...]`: the block `a [b]` repeats.
//!
//! Each command's line is written once, in the command list; the docs quote it, and a test
//! holds `docs/redis.md` to it.

/// What an argument is, as `COMMAND DOCS` types it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    /// A key name.
    Key,
    /// Text.
    String,
    /// An integer.
    Integer,
    /// A real number.
    Double,
    /// A keyword alone.
    PureToken,
    /// One of the sub-arguments.
    OneOf,
    /// The sub-arguments together.
    Block,
}

/// One argument of a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgDoc {
    /// Its name (the value's name, or the token in lower case for a pure token).
    pub name: String,
    /// Its type.
    pub kind: ArgType,
    /// The keyword before it, if any.
    pub token: Option<String>,
    /// Whether it may be left out.
    pub optional: bool,
    /// Whether it may repeat.
    pub multiple: bool,
    /// A block's or a choice's parts.
    pub subargs: Vec<ArgDoc>,
}

impl ArgDoc {
    fn leaf(name: &str, token: Option<&str>) -> ArgDoc {
        let kind = match (token, name) {
            (Some(_), "") => ArgType::PureToken,
            (_, "key" | "dest") => ArgType::Key,
            (_, "ms" | "n" | "k" | "p" | "bits" | "count" | "schema") => ArgType::Integer,
            (_, "e" | "d" | "phi" | "r" | "alpha" | "q" | "value") => ArgType::Double,
            _ => ArgType::String,
        };
        ArgDoc {
            name: if name.is_empty() {
                token.unwrap_or_default().to_ascii_lowercase()
            } else {
                name.to_string()
            },
            kind,
            token: token.map(str::to_string),
            optional: false,
            multiple: false,
            subargs: Vec::new(),
        }
    }

    /// Words it takes when present once (a token and its value are two).
    fn words(&self) -> usize {
        match self.kind {
            ArgType::Block => self
                .subargs
                .iter()
                .filter(|a| !a.optional)
                .map(|a| a.words())
                .sum(),
            ArgType::OneOf => self.subargs.iter().map(|a| a.words()).min().unwrap_or(0),
            _ => 1 + usize::from(self.token.is_some() && self.kind != ArgType::PureToken),
        }
    }

    /// The argument as the usage line writes it.
    fn render(&self, out: &mut Vec<String>) {
        let mut body = Vec::new();
        match self.kind {
            ArgType::PureToken => body.push(self.token.clone().unwrap_or_default()),
            ArgType::Block => self.subargs.iter().for_each(|a| a.render(&mut body)),
            ArgType::OneOf => {
                for (i, a) in self.subargs.iter().enumerate() {
                    if i > 0 {
                        body.push("|".into());
                    }
                    a.render(&mut body);
                }
            }
            _ => {
                if let Some(t) = &self.token {
                    body.push(t.clone());
                }
                body.push(self.name.clone());
            }
        }
        let group = |v: Vec<String>| format!("[{}]", v.join(" "));
        match (self.optional, self.multiple) {
            (false, false) => out.extend(body),
            (true, false) => out.push(group(body)),
            (false, true) => {
                let again = group(body.iter().cloned().chain(["...".into()]).collect());
                out.extend(body);
                out.push(again);
            }
            (true, true) => {
                out.push(group(body.iter().cloned().chain(["...".into()]).collect()));
            }
        }
    }
}

/// A usage line that does not parse: what is wrong with it (a defect of the command list,
/// found by a unit test and at load).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadUsage(pub String);

impl std::fmt::Display for BadUsage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadUsage {}

impl From<String> for BadUsage {
    fn from(message: String) -> BadUsage {
        BadUsage(message)
    }
}

/// Reads a usage line into its arguments.
pub fn parse(usage: &str) -> Result<Vec<ArgDoc>, BadUsage> {
    let spaced = usage.replace('[', " [ ").replace(']', " ] ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let mut at = 0;
    let args = seq(&words, &mut at)?;
    match words.get(at) {
        None => Ok(args),
        Some(w) => Err(BadUsage(format!("unexpected '{w}' in '{usage}'"))),
    }
}

fn is_token(w: &str) -> bool {
    w.bytes().any(|b| b.is_ascii_uppercase())
        && w.bytes()
            .all(|b| b.is_ascii_uppercase() || b == b'-' || b == b'_')
}

/// Arguments up to a `]`, a `|` or the end.
fn seq(words: &[&str], at: &mut usize) -> Result<Vec<ArgDoc>, String> {
    let mut out: Vec<ArgDoc> = Vec::new();
    while let Some(&w) = words.get(*at) {
        match w {
            "]" | "|" => break,
            "[" => {
                *at += 1;
                let mut alts = vec![seq(words, at)?];
                while words.get(*at) == Some(&"|") {
                    *at += 1;
                    alts.push(seq(words, at)?);
                }
                if words.get(*at) != Some(&"]") {
                    return Err("a '[' without its ']'".into());
                }
                *at += 1;
                group(&mut out, alts)?;
            }
            "..." => {
                // Only as the last word of a group: `[x ...]`.
                if words.get(*at + 1) != Some(&"]") {
                    return Err("'...' outside the end of a '[ … ]'".into());
                }
                *at += 1;
                out.push(ArgDoc::leaf("...", None));
            }
            w if is_token(w) => {
                *at += 1;
                match words.get(*at) {
                    Some(&v) if !is_token(v) && !matches!(v, "[" | "]" | "|" | "...") => {
                        *at += 1;
                        out.push(ArgDoc::leaf(v, Some(w)));
                    }
                    _ => out.push(ArgDoc::leaf("", Some(w))),
                }
            }
            w => {
                *at += 1;
                out.push(ArgDoc::leaf(w, None));
            }
        }
    }
    Ok(out)
}

/// A `[ … ]` group after `out`: a repetition of what precedes it, a choice, or an optional
/// argument or block.
fn group(out: &mut Vec<ArgDoc>, mut alts: Vec<Vec<ArgDoc>>) -> Result<(), String> {
    if alts.len() > 1 {
        let subargs = alts.into_iter().map(block).collect();
        out.push(ArgDoc {
            name: "choice".into(),
            kind: ArgType::OneOf,
            token: None,
            optional: true,
            multiple: false,
            subargs,
        });
        return Ok(());
    }
    let mut inner = alts.pop().unwrap_or_default();
    let repeats = inner
        .last()
        .is_some_and(|a| a.name == "..." && a.token.is_none());
    if !repeats {
        let mut arg = block(inner);
        arg.optional = true;
        out.push(arg);
        return Ok(());
    }
    inner.pop();
    // `x [x ...]`: the group repeats the arguments just before it.
    let n = inner.len();
    if n == 0 || out.len() < n || out[out.len() - n..] != inner[..] {
        return Err("a '[… ...]' that does not repeat what precedes it".into());
    }
    out.truncate(out.len() - n);
    let mut arg = block(inner);
    arg.multiple = true;
    out.push(arg);
    Ok(())
}

/// One argument as it is, or several as a block.
fn block(mut args: Vec<ArgDoc>) -> ArgDoc {
    if args.len() == 1 {
        return args.pop().unwrap_or_else(|| ArgDoc::leaf("", None));
    }
    ArgDoc {
        name: args
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join("_"),
        kind: ArgType::Block,
        token: None,
        optional: false,
        multiple: false,
        subargs: args,
    }
}

/// The usage line of parsed arguments (what [`parse`] reads back to the same tree).
pub fn render(args: &[ArgDoc]) -> String {
    let mut out = Vec::new();
    args.iter().for_each(|a| a.render(&mut out));
    out.join(" ")
}

/// Redis's arity: the words of the shortest call, the name included, negative when a call
/// may have more.
pub fn arity(args: &[ArgDoc]) -> i32 {
    let least: usize = 1 + args
        .iter()
        .filter(|a| !a.optional)
        .map(ArgDoc::words)
        .sum::<usize>();
    let open = args
        .iter()
        .any(|a| a.optional || a.multiple || matches!(a.kind, ArgType::OneOf | ArgType::Block));
    if open {
        -(least as i32)
    } else {
        least as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_into_trees_and_back() {
        for line in [
            "key WINDOW ms [EPSILON e]",
            "key time [n]",
            "key [AT time]",
            "key WINDOW ms [BUCKET ms | SLIDING] [PRECISION p]",
            "key time item [item ...]",
            "key [key ...] [WINDOW ms] [AT time]",
            "key time item [count] [item [count] ...]",
            "key CAPACITY n FPR r [RESERVE bits | STACKED] [EXPIRE ms]",
            "key bytes",
        ] {
            let args = parse(line).unwrap();
            assert_eq!(render(&args), line);
        }
    }

    #[test]
    fn types_tokens_repetition_and_arity() {
        let args = parse("key time item [count] [item [count] ...]").unwrap();
        assert_eq!(args.len(), 3);
        assert_eq!(args[0].kind, ArgType::Key);
        assert_eq!(args[1].kind, ArgType::String);
        assert_eq!(args[2].kind, ArgType::Block);
        assert!(args[2].multiple && !args[2].optional);
        assert_eq!(args[2].subargs[1].kind, ArgType::Integer);
        assert!(args[2].subargs[1].optional);
        assert_eq!(arity(&args), -4);

        let args = parse("key WINDOW ms [BUCKET ms | SLIDING] [PRECISION p]").unwrap();
        assert_eq!(args[1].token.as_deref(), Some("WINDOW"));
        assert_eq!(args[1].kind, ArgType::Integer);
        assert_eq!(args[2].kind, ArgType::OneOf);
        assert_eq!(args[2].subargs[1].kind, ArgType::PureToken);
        assert_eq!(arity(&args), -4);

        assert_eq!(arity(&parse("key bytes").unwrap()), 3);
        assert_eq!(arity(&parse("key").unwrap()), 2);
        assert_eq!(arity(&parse("key [key ...] [WINDOW ms]").unwrap()), -2);
    }

    #[test]
    fn malformed_lines_are_refused() {
        for bad in ["key [x", "key x]", "key [y ...]", "key ...", "key [a | b"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
