//! An elicitation form (MCP's form mode): its fields read from the server's
//! `requestedSchema`, each answer parsed as its field says and checked
//! against the field's schema before anything is sent.
//!
//! MCP keeps these schemas flat: strings (with `format`), numbers,
//! booleans, single choices (`enum`, or `oneOf` of `const` and `title`) and
//! multiple choices (an array whose `items` hold the choices). The terminal
//! asks the fields one by one (`terminal.rs`); a script fills them from
//! `--answers` and `--accept-defaults` (`fill`).

use serde_json::{Map, Value};

use super::escape::escaped;

/// One field of the form.
pub(super) struct Field<'a> {
    pub(super) name: &'a str,
    pub(super) title: &'a str,
    pub(super) description: Option<&'a str>,
    pub(super) kind: Kind,
    /// A choice field's values and what each is shown as.
    pub(super) choices: Vec<(Value, String)>,
    pub(super) default: Option<&'a Value>,
    pub(super) required: bool,
    schema: &'a Value,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Text,
    Integer,
    Number,
    Boolean,
    /// One of `choices`.
    OneOf,
    /// Any of `choices`, as an array.
    AnyOf,
}

/// The fields of a `requestedSchema`, in its order.
pub(super) fn fields(schema: &Value) -> Vec<Field<'_>> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map_or(Vec::new(), |names| names.iter().filter_map(Value::as_str).collect());
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let text = |key: &str| property.get(key).and_then(Value::as_str);
            let items = property.get("items").unwrap_or(&Value::Null);
            let (kind, choices) = match text("type") {
                Some("array") => (Kind::AnyOf, choices_of(items)),
                _ if !choices_of(property).is_empty() => (Kind::OneOf, choices_of(property)),
                Some("integer") => (Kind::Integer, Vec::new()),
                Some("number") => (Kind::Number, Vec::new()),
                Some("boolean") => (Kind::Boolean, Vec::new()),
                _ => (Kind::Text, Vec::new()),
            };
            Field {
                name,
                title: text("title").unwrap_or(name),
                description: text("description"),
                kind,
                choices,
                default: property.get("default"),
                required: required.contains(&name.as_str()),
                schema: property,
            }
        })
        .collect()
}

/// The choices a schema offers: `enum` (with the older `enumNames` as
/// their titles), or `oneOf`/`anyOf` of `const` with `title`.
fn choices_of(schema: &Value) -> Vec<(Value, String)> {
    let shown = |value: &Value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names = schema.get("enumNames").and_then(Value::as_array);
        return values
            .iter()
            .enumerate()
            .map(|(at, value)| {
                let name = names.and_then(|names| names.get(at)).and_then(Value::as_str);
                (value.clone(), name.map_or_else(|| shown(value), str::to_owned))
            })
            .collect();
    }
    let titled = schema.get("oneOf").or_else(|| schema.get("anyOf"));
    titled.and_then(Value::as_array).map_or(Vec::new(), |options| {
        options
            .iter()
            .filter_map(|option| {
                let value = option.get("const")?;
                let title = option.get("title").and_then(Value::as_str);
                Some((value.clone(), title.map_or_else(|| shown(value), str::to_owned)))
            })
            .collect()
    })
}

impl Field<'_> {
    /// The question for this field, as the terminal asks it.
    pub(super) fn question(&self) -> String {
        let mut question = escaped(self.title);
        let listed = |choices: &[(Value, String)]| {
            let named: Vec<String> = choices
                .iter()
                .enumerate()
                .map(|(at, (_, title))| format!("{} {}", at + 1, escaped(title)))
                .collect();
            named.join(", ")
        };
        match self.kind {
            Kind::OneOf => question.push_str(&format!(" (one of: {})", listed(&self.choices))),
            Kind::AnyOf => question
                .push_str(&format!(" (any of: {}; separated by commas)", listed(&self.choices))),
            Kind::Integer => question.push_str(" (a whole number)"),
            Kind::Number => question.push_str(" (a number)"),
            Kind::Boolean => question.push_str(" (yes or no)"),
            Kind::Text => {
                if let Some(format) = self.schema.get("format").and_then(Value::as_str) {
                    question.push_str(&format!(" ({})", escaped(format)));
                }
            }
        }
        if let Some(default) = self.default {
            question.push_str(&format!(" [{}]", escaped(&self.shown(default))));
        }
        if self.required {
            question.push_str(" *");
        }
        question.push_str(": ");
        question
    }

    /// A value as the person sees it: a choice by its title.
    fn shown(&self, value: &Value) -> String {
        let one = |value: &Value| {
            self.choices
                .iter()
                .find(|(choice, _)| choice == value)
                .map(|(_, title)| title.clone())
                .unwrap_or_else(|| match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
        };
        match value {
            Value::Array(values) => values.iter().map(one).collect::<Vec<_>>().join(", "),
            other => one(other),
        }
    }

    /// What a person typed, as this field's value, checked.
    pub(super) fn parse(&self, typed: &str) -> Result<Value, String> {
        let typed = typed.trim();
        let value = match self.kind {
            Kind::Text => Value::String(typed.to_owned()),
            Kind::Integer => {
                typed.parse::<i64>().map(Value::from).map_err(|_| "A whole number, please.")?
            }
            Kind::Number => typed
                .parse::<f64>()
                .ok()
                .filter(|number| number.is_finite())
                .map(Value::from)
                .ok_or("A number, please.")?,
            Kind::Boolean => match typed.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" => Value::Bool(true),
                "n" | "no" | "false" => Value::Bool(false),
                _ => return Err("yes or no, please.".into()),
            },
            Kind::OneOf => self.choice(typed)?,
            Kind::AnyOf => Value::Array(
                typed
                    .split(',')
                    .map(str::trim)
                    .filter(|word| !word.is_empty())
                    .map(|word| self.choice(word))
                    .collect::<Result<_, _>>()?,
            ),
        };
        self.check(&value)?;
        Ok(value)
    }

    /// A choice by its number, its title or its value.
    fn choice(&self, typed: &str) -> Result<Value, String> {
        let by_number = typed
            .parse::<usize>()
            .ok()
            .and_then(|number| number.checked_sub(1))
            .and_then(|at| self.choices.get(at));
        let by_name = || {
            self.choices.iter().find(|(value, title)| {
                title.eq_ignore_ascii_case(typed) || value.as_str() == Some(typed)
            })
        };
        match by_name().or(by_number) {
            Some((value, _)) => Ok(value.clone()),
            None => {
                let titles: Vec<String> =
                    self.choices.iter().map(|(_, title)| escaped(title)).collect();
                Err(format!("Choose from: {} (or their numbers).", titles.join(", ")))
            }
        }
    }

    /// Checks a value against the field's schema and `format`.
    pub(super) fn check(&self, value: &Value) -> Result<(), String> {
        if let Err(why) = tether::for_cli::check_schema(value, self.schema) {
            // `$: expected at least 3 characters, found 1`: the path is the field.
            let why = why.strip_prefix("$: ").unwrap_or(&why);
            return Err(format!("Not accepted: {}.", escaped(why)));
        }
        match (self.schema.get("format").and_then(Value::as_str), value.as_str()) {
            (Some(format), Some(text)) if !formatted(format, text) => {
                Err(format!("Not accepted: not a valid {}.", escaped(format)))
            }
            _ => Ok(()),
        }
    }
}

/// True when `text` is written as MCP's form `format` says (`email`, `uri`,
/// `date`, `date-time`); any other format is not judged.
fn formatted(format: &str, text: &str) -> bool {
    let digits = |part: &str, count: usize| {
        part.len() == count && part.bytes().all(|byte| byte.is_ascii_digit())
    };
    let date = |text: &str| {
        let parts: Vec<&str> = text.split('-').collect();
        let number = |part: &str| part.parse::<u32>().unwrap_or(0);
        let [year, month, day] = parts[..] else { return false };
        if !(digits(year, 4) && digits(month, 2) && digits(day, 2)) {
            return false;
        }
        let (year, month, day) = (number(year), number(month), number(day));
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        let days = match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return false,
        };
        (1..=days).contains(&day)
    };
    match format {
        "email" => match text.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty()
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
                    && !text.contains(char::is_whitespace)
                    && !domain.contains('@')
            }
            None => false,
        },
        "uri" => text.split_once(':').is_some_and(|(scheme, rest)| {
            scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.is_empty()
                && !text.contains(char::is_whitespace)
        }),
        "date" => date(text),
        "date-time" => {
            let Some((day, time)) = text.split_once(['T', 't']) else { return false };
            let zone = time.rfind(['Z', 'z', '+', '-']).map_or("", |at| &time[at..]);
            let clock = &time[..time.len() - zone.len()];
            let clock = clock.split_once('.').map_or(clock, |(whole, fraction)| {
                if digits(fraction, fraction.len()) && !fraction.is_empty() {
                    whole
                } else {
                    ""
                }
            });
            let hms: Vec<&str> = clock.split(':').collect();
            let zone_ok = zone.eq_ignore_ascii_case("z")
                || (zone.is_ascii()
                    && zone.len() == 6
                    && digits(&zone[1..3], 2)
                    && &zone[3..4] == ":"
                    && digits(&zone[4..], 2));
            date(day) && zone_ok && hms.len() == 3 && hms.iter().all(|part| digits(part, 2))
        }
        _ => true,
    }
}

/// A form filled without asking: `answers` first, then, with
/// `accept_defaults`, each field's default. Every value is checked; the
/// error names the first field that has no acceptable answer.
pub(super) fn fill(
    fields: &[Field<'_>],
    answers: Option<&Map<String, Value>>,
    accept_defaults: bool,
) -> Result<Map<String, Value>, String> {
    let mut content = Map::new();
    for field in fields {
        let given = answers.and_then(|answers| answers.get(field.name));
        let value = match (given, field.default) {
            (Some(value), _) => {
                // Typed words are read as the terminal reads them, and a
                // choice may be named by its title (or its number).
                let value = match (value, field.kind) {
                    (
                        Value::String(typed),
                        Kind::Integer | Kind::Number | Kind::Boolean | Kind::OneOf | Kind::AnyOf,
                    ) => field.parse(typed),
                    (Value::Number(number), Kind::OneOf) if field.check(value).is_err() => {
                        field.parse(&number.to_string())
                    }
                    (Value::Array(items), Kind::AnyOf) if field.check(value).is_err() => items
                        .iter()
                        .map(|item| match item {
                            Value::String(typed) => field.choice(typed),
                            other => field.choice(&other.to_string()),
                        })
                        .collect::<Result<Vec<Value>, String>>()
                        .and_then(|chosen| {
                            let chosen = Value::Array(chosen);
                            field.check(&chosen).map(|()| chosen)
                        }),
                    (value, _) => field.check(value).map(|()| value.clone()),
                };
                value.map_err(|why| format!("the answer for {:?}: {why}", field.name))?
            }
            (None, Some(default)) if accept_defaults => default.clone(),
            (None, _) if field.required => {
                return Err(format!(
                    "no answer for the required field {:?} (give it in --answers)",
                    field.name
                ))
            }
            (None, _) => continue,
        };
        content.insert(field.name.to_owned(), value);
    }
    if let Some(answers) = answers {
        for name in answers.keys() {
            if !fields.iter().any(|field| field.name == name) {
                eprintln!(
                    "warning: the form has no field {:?}; that answer is not sent",
                    escaped(name)
                );
            }
        }
    }
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2, "title": "Name"},
                "email": {"type": "string", "format": "email"},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "color": {"type": "string", "oneOf": [
                    {"const": "#f00", "title": "Red"}, {"const": "#0f0", "title": "Green"}]},
                "sizes": {"type": "array", "minItems": 1, "maxItems": 2,
                          "items": {"anyOf": [{"const": "s", "title": "Small"},
                                              {"const": "m", "title": "Medium"},
                                              {"const": "l", "title": "Large"}]},
                          "default": ["m"]},
                "plain": {"type": "string", "enum": ["a", "b"], "enumNames": ["Ay", "Bee"]},
                "ok": {"type": "boolean", "default": true}
            },
            "required": ["name", "color"]
        })
    }

    #[test]
    fn fields_list_their_choices_by_title() {
        let form = form();
        let fields = fields(&form);
        let questions: Vec<String> = fields.iter().map(Field::question).collect();
        assert_eq!(questions[0], "Name *: ");
        assert_eq!(questions[1], "email (email): ");
        assert_eq!(questions[3], "color (one of: 1 Red, 2 Green) *: ");
        assert_eq!(
            questions[4],
            "sizes (any of: 1 Small, 2 Medium, 3 Large; separated by commas) [Medium]: "
        );
        assert_eq!(questions[5], "plain (one of: 1 Ay, 2 Bee): ");
        assert_eq!(questions[6], "ok (yes or no) [true]: ");
    }

    #[test]
    fn answers_are_parsed_and_checked() {
        let form = form();
        let fields = fields(&form);
        assert_eq!(
            fields[0].parse("x"),
            Err("Not accepted: expected at least 2 characters, found 1.".into())
        );
        assert_eq!(fields[1].parse("me@example.com"), Ok(json!("me@example.com")));
        assert_eq!(fields[1].parse("me@example"), Err("Not accepted: not a valid email.".into()));
        assert_eq!(fields[2].parse("200"), Err("Not accepted: expected at most 150.".into()));
        assert_eq!(fields[3].parse("2"), Ok(json!("#0f0")));
        assert_eq!(fields[3].parse("red"), Ok(json!("#f00")));
        assert!(fields[3].parse("blue").unwrap_err().starts_with("Choose from: Red, Green"));
        assert_eq!(fields[4].parse("1, large"), Ok(json!(["s", "l"])));
        assert_eq!(
            fields[4].parse("1,2,3"),
            Err("Not accepted: expected at most 2 items, found 3.".into())
        );
        assert_eq!(fields[5].parse("Bee"), Ok(json!("b")));
    }

    #[test]
    fn a_script_fills_the_form_from_answers_and_defaults() {
        let form = form();
        let fields = fields(&form);
        let answers = json!({"name": "Ada", "color": "#f00", "age": "36"});
        let filled = fill(&fields, answers.as_object(), true).unwrap();
        assert_eq!(
            Value::Object(filled),
            json!({"name": "Ada", "age": 36, "color": "#f00", "sizes": ["m"], "ok": true})
        );
        let filled = fill(&fields, answers.as_object(), false).unwrap();
        assert_eq!(Value::Object(filled), json!({"name": "Ada", "age": 36, "color": "#f00"}));
        assert_eq!(
            fill(&fields, None, true),
            Err("no answer for the required field \"name\" (give it in --answers)".into())
        );
        let titled = json!({"name": "Ada", "color": "Green", "sizes": ["Small", "l"]});
        let filled = fill(&fields, titled.as_object(), false).unwrap();
        assert_eq!((&filled["color"], &filled["sizes"]), (&json!("#0f0"), &json!(["s", "l"])));
        let typed = json!({"name": "Ada", "color": 2, "sizes": "Small, Large"});
        let filled = fill(&fields, typed.as_object(), false).unwrap();
        assert_eq!((&filled["color"], &filled["sizes"]), (&json!("#0f0"), &json!(["s", "l"])));
        let wrong = json!({"name": "Ada", "color": "blue"});
        assert!(fill(&fields, wrong.as_object(), true)
            .unwrap_err()
            .starts_with("the answer for \"color\""));
    }

    #[test]
    fn formats_are_judged() {
        assert!(formatted("date", "2026-12-02"));
        assert!(!formatted("date", "2026-13-02"));
        assert!(!formatted("date", "2021-02-29"));
        assert!(formatted("date", "2024-02-29"));
        assert!(!formatted("date", "2021-04-31"));
        assert!(formatted("date-time", "2026-12-02T13:19:38Z"));
        assert!(formatted("date-time", "2026-12-02T13:19:38.5+01:00"));
        assert!(!formatted("date-time", "2026-12-02 13:19:38"));
        assert!(!formatted("date-time", "2024-01-01T10:00:00+0\u{20ac}1"));
        assert!(!formatted("date-time", "2024-01-01T10:00:\u{e9}0Z"));
        assert!(formatted("uri", "https://example.com/x"));
        assert!(!formatted("uri", "not a uri"));
        assert!(formatted("email", "a.b@c.org"));
        assert!(!formatted("email", "a b@c.org"));
        assert!(formatted("anything-else", "whatever"));
    }
}
