//! A metric's kind-specific keys: the TOML table of a `[[metric]]` less the keys every metric
//! has, read with errors that name the key (`metric[0].precision`).

use crate::error::ConfigError;

/// The keys of one `[[metric]]` table a kind reads ([`crate::kinds::MetricKind::parse`]).
pub struct KindKeys<'a> {
    table: &'a toml::Table,
    at: &'a dyn Fn(&str) -> String,
}

impl<'a> KindKeys<'a> {
    /// The keys of `table`, named as `at` spells them.
    pub(crate) fn new(table: &'a toml::Table, at: &'a dyn Fn(&str) -> String) -> KindKeys<'a> {
        KindKeys { table, at }
    }

    /// The key's path in the config (`metric[0].phi`), for errors.
    pub fn at(&self, key: &str) -> String {
        (self.at)(key)
    }

    fn wrong_type(&self, key: &str, expected: &str, got: &toml::Value) -> ConfigError {
        ConfigError::invalid(self.at(key), expected, format!("a {}", got.type_str()))
    }

    /// A number (an integer or a float), if given.
    pub fn number(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Float(x)) => Ok(Some(*x)),
            Some(toml::Value::Integer(n)) => Ok(Some(*n as f64)),
            Some(other) => Err(self.wrong_type(key, "a number", other)),
        }
    }

    /// An integer, if given.
    pub fn integer(&self, key: &str) -> Result<Option<i64>, ConfigError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(n)) => Ok(Some(*n)),
            Some(other) => Err(self.wrong_type(key, "an integer", other)),
        }
    }

    /// A string, if given.
    pub fn text(&self, key: &str) -> Result<Option<&'a str>, ConfigError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong_type(key, "a string", other)),
        }
    }

    /// A list of numbers, if given (at most `max` of them).
    pub fn numbers(&self, key: &str, max: usize) -> Result<Option<Vec<f64>>, ConfigError> {
        let list = match self.table.get(key) {
            None => return Ok(None),
            Some(toml::Value::Array(list)) => list,
            Some(other) => return Err(self.wrong_type(key, "a list of numbers", other)),
        };
        if list.len() > max {
            return Err(ConfigError::invalid(
                self.at(key),
                format!("at most {max} numbers"),
                list.len(),
            ));
        }
        list.iter()
            .enumerate()
            .map(|(i, v)| match v {
                toml::Value::Float(x) => Ok(*x),
                toml::Value::Integer(n) => Ok(*n as f64),
                other => Err(self.wrong_type(&format!("{key}[{i}]"), "a number", other)),
            })
            .collect::<Result<Vec<f64>, _>>()
            .map(Some)
    }
}
