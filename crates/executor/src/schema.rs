//! JSON Schema for tool arguments: the subset of draft 2020-12 that describes tool inputs,
//! compiled once when a tool is registered and checked before every run.
//!
//! Why not a general validator: the one the executor used (`jsonschema`) brought two regular
//! expression engines, their Unicode tables, big integers and a URI resolver, which were two
//! thirds of the browser module. Tool inputs need none of that. A schema that uses a keyword
//! outside the subset is refused at registration with its name, so nothing is silently left
//! unchecked. docs/EXECUTOR.md lists the subset.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde_json::{Map, Value};

/// Deepest nesting of schemas (and of `$ref` hops while checking) before a schema is refused.
const MAX_DEPTH: usize = 32;

/// Keywords that only describe and never constrain; accepted and ignored.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    // In 2020-12 `format` is an annotation unless a validator opts in.
    "format",
];

/// Why a schema was refused at registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError(String);

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SchemaError {}

fn refuse<T>(at: &str, why: impl fmt::Display) -> Result<T, SchemaError> {
    Err(SchemaError(if at.is_empty() {
        why.to_string()
    } else {
        format!("at {at}: {why}")
    }))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Null,
    Boolean,
    Object,
    Array,
    Number,
    Integer,
    String,
}

impl Type {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "null" => Self::Null,
            "boolean" => Self::Boolean,
            "object" => Self::Object,
            "array" => Self::Array,
            "number" => Self::Number,
            "integer" => Self::Integer,
            "string" => Self::String,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Boolean => "boolean",
            Self::Object => "object",
            Self::Array => "array",
            Self::Number => "number",
            Self::Integer => "integer",
            Self::String => "string",
        }
    }

    fn matches(self, value: &Value) -> bool {
        match self {
            Self::Null => value.is_null(),
            Self::Boolean => value.is_boolean(),
            Self::Object => value.is_object(),
            Self::Array => value.is_array(),
            Self::Number => value.is_number(),
            // 2020-12: a number with a zero fractional part is an integer (1.0 is).
            Self::Integer => {
                value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|n| n.fract() == 0.0)
            }
            Self::String => value.is_string(),
        }
    }
}

/// One compiled schema. `Any` is `true` or `{}`; `Never` is `false`.
#[derive(Debug, Clone, Default)]
struct Node {
    never: bool,
    types: Option<Vec<Type>>,
    enumeration: Option<Vec<Value>>,
    constant: Option<Value>,
    properties: BTreeMap<String, Node>,
    required: Vec<String>,
    additional: Option<Box<Node>>,
    min_properties: Option<usize>,
    max_properties: Option<usize>,
    items: Option<Box<Node>>,
    min_items: Option<usize>,
    max_items: Option<usize>,
    unique_items: bool,
    min_length: Option<usize>,
    max_length: Option<usize>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    exclusive_maximum: Option<f64>,
    multiple_of: Option<f64>,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
    reference: Option<String>,
}

/// A tool's compiled input schema.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Node,
    definitions: BTreeMap<String, Node>,
}

impl Schema {
    /// Compiles `schema`, refusing anything outside the subset.
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        let mut definitions = BTreeMap::new();
        if let Value::Object(map) = schema {
            for keyword in ["$defs", "definitions"] {
                let Some(defs) = map.get(keyword) else {
                    continue;
                };
                let Value::Object(defs) = defs else {
                    return refuse("", format!("\"{keyword}\" must be an object"));
                };
                for (name, def) in defs {
                    let at = format!("/{keyword}/{name}");
                    definitions.insert(format!("#/{keyword}/{name}"), compile(def, &at, 1)?);
                }
            }
        }
        let compiled = Self {
            root: compile(schema, "", 0)?,
            definitions,
        };
        compiled.check_references(&compiled.root)?;
        for node in compiled.definitions.values() {
            compiled.check_references(node)?;
        }
        Ok(compiled)
    }

    fn check_references(&self, node: &Node) -> Result<(), SchemaError> {
        if let Some(target) = &node.reference
            && !self.definitions.contains_key(target)
        {
            return refuse("", format!("\"$ref\" {target:?} names no definition"));
        }
        let children = node
            .properties
            .values()
            .chain(node.additional.as_deref())
            .chain(node.items.as_deref())
            .chain(node.not.as_deref())
            .chain(&node.all_of)
            .chain(&node.any_of)
            .chain(&node.one_of);
        for child in children {
            self.check_references(child)?;
        }
        Ok(())
    }

    /// Whether `value` is valid.
    pub fn is_valid(&self, value: &Value) -> bool {
        let mut errors = Vec::new();
        self.check(&self.root, value, "", 0, &mut errors, 1);
        errors.is_empty()
    }

    /// Up to `most` explanations of why `value` is invalid, each with its JSON pointer.
    pub fn errors(&self, value: &Value, most: usize) -> Vec<String> {
        let mut errors = Vec::new();
        self.check(&self.root, value, "", 0, &mut errors, most);
        errors
    }

    fn check(
        &self,
        node: &Node,
        value: &Value,
        at: &str,
        depth: usize,
        errors: &mut Vec<String>,
        most: usize,
    ) {
        let fail = |errors: &mut Vec<String>, why: String| {
            if errors.len() < most {
                errors.push(if at.is_empty() {
                    why
                } else {
                    format!("{at}: {why}")
                });
            }
        };
        if errors.len() >= most {
            return;
        }
        if depth > MAX_DEPTH {
            fail(errors, "the schema nests too deeply to check".into());
            return;
        }
        if node.never {
            fail(errors, "no value is allowed here".into());
            return;
        }
        if let Some(target) = &node.reference {
            let target = &self.definitions[target];
            self.check(target, value, at, depth + 1, errors, most);
        }
        if let Some(types) = &node.types
            && !types.iter().any(|t| t.matches(value))
        {
            let names: Vec<_> = types.iter().map(|t| t.name()).collect();
            fail(
                errors,
                format!("{value} is not of type {}", names.join(" or ")),
            );
            return;
        }
        if let Some(allowed) = &node.enumeration
            && !allowed.iter().any(|a| equal(a, value))
        {
            fail(
                errors,
                format!("{value} is not one of {}", Value::from(allowed.clone())),
            );
        }
        if let Some(constant) = &node.constant
            && !equal(constant, value)
        {
            fail(errors, format!("{value} is not {constant}"));
        }
        match value {
            Value::Object(map) => self.check_object(node, map, at, depth, errors, most),
            Value::Array(items) => {
                if node.min_items.is_some_and(|n| items.len() < n) {
                    fail(
                        errors,
                        format!("has fewer than {} items", node.min_items.unwrap_or(0)),
                    );
                }
                if node.max_items.is_some_and(|n| items.len() > n) {
                    fail(
                        errors,
                        format!("has more than {} items", node.max_items.unwrap_or(0)),
                    );
                }
                if node.unique_items && !unique(items) {
                    fail(errors, "has repeated items".into());
                }
                if let Some(schema) = &node.items {
                    for (i, item) in items.iter().enumerate() {
                        self.check(schema, item, &format!("{at}/{i}"), depth + 1, errors, most);
                    }
                }
            }
            Value::String(text) => {
                let chars = text.chars().count();
                if let Some(n) = node.min_length.filter(|&n| chars < n) {
                    fail(errors, format!("{value} is shorter than {n} characters"));
                }
                if let Some(n) = node.max_length.filter(|&n| chars > n) {
                    fail(errors, format!("{value} is longer than {n} characters"));
                }
            }
            Value::Number(number) => {
                let n = number.as_f64().unwrap_or(f64::NAN);
                if let Some(min) = node.minimum.filter(|&m| n < m) {
                    fail(errors, format!("{value} is less than the minimum of {min}"));
                }
                if let Some(max) = node.maximum.filter(|&m| n > m) {
                    fail(
                        errors,
                        format!("{value} is greater than the maximum of {max}"),
                    );
                }
                if let Some(min) = node.exclusive_minimum.filter(|&m| n <= m) {
                    fail(errors, format!("{value} is not greater than {min}"));
                }
                if let Some(max) = node.exclusive_maximum.filter(|&m| n >= m) {
                    fail(errors, format!("{value} is not less than {max}"));
                }
                if let Some(step) = node.multiple_of {
                    let ratio = n / step;
                    if !ratio.is_finite() || ratio.fract() != 0.0 {
                        fail(errors, format!("{value} is not a multiple of {step}"));
                    }
                }
            }
            _ => {}
        }
        for schema in &node.all_of {
            self.check(schema, value, at, depth + 1, errors, most);
        }
        let passes = |schema: &Node| {
            let mut inner = Vec::new();
            self.check(schema, value, at, depth + 1, &mut inner, 1);
            inner.is_empty()
        };
        if !node.any_of.is_empty() && !node.any_of.iter().any(passes) {
            fail(errors, format!("{value} matches none of the allowed forms"));
        }
        if !node.one_of.is_empty() {
            let matched = node.one_of.iter().filter(|s| passes(s)).count();
            if matched != 1 {
                fail(
                    errors,
                    format!("{value} matches {matched} of the forms where exactly one must match"),
                );
            }
        }
        if let Some(schema) = &node.not
            && passes(schema)
        {
            fail(
                errors,
                format!("{value} matches a form that is not allowed"),
            );
        }
    }

    fn check_object(
        &self,
        node: &Node,
        map: &Map<String, Value>,
        at: &str,
        depth: usize,
        errors: &mut Vec<String>,
        most: usize,
    ) {
        let fail = |errors: &mut Vec<String>, why: String| {
            if errors.len() < most {
                errors.push(if at.is_empty() {
                    why
                } else {
                    format!("{at}: {why}")
                });
            }
        };
        for name in &node.required {
            if !map.contains_key(name) {
                fail(errors, format!("{name:?} is a required property"));
            }
        }
        if node.min_properties.is_some_and(|n| map.len() < n) {
            fail(
                errors,
                format!(
                    "has fewer than {} properties",
                    node.min_properties.unwrap_or(0)
                ),
            );
        }
        if node.max_properties.is_some_and(|n| map.len() > n) {
            fail(
                errors,
                format!(
                    "has more than {} properties",
                    node.max_properties.unwrap_or(0)
                ),
            );
        }
        for (name, item) in map {
            let here = format!("{at}/{}", escape_pointer(name));
            match (node.properties.get(name), &node.additional) {
                (Some(schema), _) => self.check(schema, item, &here, depth + 1, errors, most),
                (None, Some(schema)) if schema.never => {
                    fail(errors, format!("{name:?} is not an allowed property"));
                }
                (None, Some(schema)) => self.check(schema, item, &here, depth + 1, errors, most),
                (None, None) => {}
            }
        }
    }
}

fn escape_pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// JSON equality with numbers compared by value (1 equals 1.0), as JSON Schema requires.
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

fn unique(items: &[Value]) -> bool {
    // Quadratic only on the rare arrays that are not all strings.
    let strings: Option<HashSet<&str>> = items.iter().map(Value::as_str).collect();
    match strings {
        Some(set) => set.len() == items.len(),
        None => items
            .iter()
            .enumerate()
            .all(|(i, a)| items[i + 1..].iter().all(|b| !equal(a, b))),
    }
}

fn count(value: &Value, at: &str, keyword: &str) -> Result<usize, SchemaError> {
    match value.as_u64() {
        Some(n) => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
        None => refuse(at, format!("\"{keyword}\" must be a non-negative integer")),
    }
}

fn number(value: &Value, at: &str, keyword: &str) -> Result<f64, SchemaError> {
    match value.as_f64() {
        Some(n) => Ok(n),
        None => refuse(at, format!("\"{keyword}\" must be a number")),
    }
}

fn list(value: &Value, at: &str, keyword: &str, depth: usize) -> Result<Vec<Node>, SchemaError> {
    match value {
        Value::Array(schemas) if !schemas.is_empty() => schemas
            .iter()
            .enumerate()
            .map(|(i, s)| compile(s, &format!("{at}/{keyword}/{i}"), depth + 1))
            .collect(),
        _ => refuse(
            at,
            format!("\"{keyword}\" must be a non-empty array of schemas"),
        ),
    }
}

fn compile(schema: &Value, at: &str, depth: usize) -> Result<Node, SchemaError> {
    if depth > MAX_DEPTH {
        return refuse(at, "the schema nests too deeply");
    }
    let map = match schema {
        Value::Bool(true) => return Ok(Node::default()),
        Value::Bool(false) => {
            return Ok(Node {
                never: true,
                ..Node::default()
            });
        }
        Value::Object(map) => map,
        _ => return refuse(at, "a schema must be an object or a boolean"),
    };
    let mut node = Node::default();
    for (keyword, value) in map {
        let sub = |name: &str| format!("{at}/{name}");
        match keyword.as_str() {
            k if ANNOTATIONS.contains(&k) => {}
            // Compiled by `Schema::compile` at the root only.
            "$defs" | "definitions" if depth == 0 => {}
            "$ref" => match value.as_str() {
                Some(target)
                    if target.starts_with("#/$defs/") || target.starts_with("#/definitions/") =>
                {
                    node.reference = Some(target.to_owned());
                }
                _ => {
                    return refuse(
                        at,
                        "\"$ref\" may only name a local definition (\"#/$defs/NAME\")",
                    );
                }
            },
            "type" => {
                let names: Vec<&Value> = match value {
                    Value::Array(names) => names.iter().collect(),
                    other => vec![other],
                };
                let mut types = Vec::new();
                for name in names {
                    match name.as_str().and_then(Type::parse) {
                        Some(t) => types.push(t),
                        None => return refuse(at, format!("{name} is not a JSON Schema type")),
                    }
                }
                node.types = Some(types);
            }
            "enum" => match value {
                Value::Array(values) => node.enumeration = Some(values.clone()),
                _ => return refuse(at, "\"enum\" must be an array"),
            },
            "const" => node.constant = Some(value.clone()),
            "properties" => {
                let Value::Object(properties) = value else {
                    return refuse(at, "\"properties\" must be an object");
                };
                for (name, schema) in properties {
                    let here = format!("{at}/properties/{}", escape_pointer(name));
                    node.properties
                        .insert(name.clone(), compile(schema, &here, depth + 1)?);
                }
            }
            "required" => {
                let names: Option<Vec<String>> = value.as_array().and_then(|names| {
                    names
                        .iter()
                        .map(|n| n.as_str().map(str::to_owned))
                        .collect()
                });
                match names {
                    Some(names) => node.required = names,
                    None => return refuse(at, "\"required\" must be an array of strings"),
                }
            }
            "additionalProperties" => {
                node.additional = Some(Box::new(compile(value, &sub(keyword), depth + 1)?));
            }
            "items" => node.items = Some(Box::new(compile(value, &sub(keyword), depth + 1)?)),
            "not" => node.not = Some(Box::new(compile(value, &sub(keyword), depth + 1)?)),
            "allOf" => node.all_of = list(value, at, keyword, depth)?,
            "anyOf" => node.any_of = list(value, at, keyword, depth)?,
            "oneOf" => node.one_of = list(value, at, keyword, depth)?,
            "minProperties" => node.min_properties = Some(count(value, at, keyword)?),
            "maxProperties" => node.max_properties = Some(count(value, at, keyword)?),
            "minItems" => node.min_items = Some(count(value, at, keyword)?),
            "maxItems" => node.max_items = Some(count(value, at, keyword)?),
            "minLength" => node.min_length = Some(count(value, at, keyword)?),
            "maxLength" => node.max_length = Some(count(value, at, keyword)?),
            "uniqueItems" => match value {
                Value::Bool(unique) => node.unique_items = *unique,
                _ => return refuse(at, "\"uniqueItems\" must be a boolean"),
            },
            "minimum" => node.minimum = Some(number(value, at, keyword)?),
            "maximum" => node.maximum = Some(number(value, at, keyword)?),
            "exclusiveMinimum" => node.exclusive_minimum = Some(number(value, at, keyword)?),
            "exclusiveMaximum" => node.exclusive_maximum = Some(number(value, at, keyword)?),
            "multipleOf" => {
                let step = number(value, at, keyword)?;
                if step <= 0.0 {
                    return refuse(at, "\"multipleOf\" must be greater than 0");
                }
                node.multiple_of = Some(step);
            }
            other => {
                return refuse(
                    at,
                    format!(
                        "\"{other}\" is not supported in a tool's input schema (docs/EXECUTOR.md lists what is)"
                    ),
                );
            }
        }
    }
    Ok(node)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(schema: Value, valid: &[Value], invalid: &[Value]) {
        let compiled = Schema::compile(&schema).expect("compiles");
        for value in valid {
            assert!(
                compiled.is_valid(value),
                "{schema} should accept {value}: {:?}",
                compiled.errors(value, 5)
            );
        }
        for value in invalid {
            assert!(!compiled.is_valid(value), "{schema} should refuse {value}");
            assert!(!compiled.errors(value, 5).is_empty());
        }
    }

    #[test]
    fn types_and_integers() {
        check(
            json!({"type": "integer"}),
            &[json!(1), json!(1.0), json!(-3)],
            &[json!(1.5), json!("1"), json!(null)],
        );
        check(
            json!({"type": ["string", "null"]}),
            &[json!("a"), json!(null)],
            &[json!(1), json!([])],
        );
        check(
            json!({"type": "number"}),
            &[json!(1), json!(1.5)],
            &[json!("1.5"), json!(true)],
        );
    }

    #[test]
    fn objects() {
        let schema = json!({
            "type": "object",
            "properties": {"query": {"type": "string", "minLength": 1}, "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
            "required": ["query"],
            "additionalProperties": false
        });
        check(
            schema.clone(),
            &[json!({"query": "keys"}), json!({"query": "k", "limit": 50})],
            &[
                json!({}),
                json!({"query": ""}),
                json!({"query": 7}),
                json!({"query": "k", "limit": 51}),
                json!({"query": "k", "extra": 1}),
                json!("keys"),
            ],
        );
        let compiled = Schema::compile(&schema).unwrap();
        assert_eq!(
            compiled.errors(&json!({"query": "k", "limit": 1000}), 5),
            ["/limit: 1000 is greater than the maximum of 50"]
        );
        check(
            json!({"additionalProperties": {"type": "boolean"}}),
            &[json!({"a": true})],
            &[json!({"a": 1})],
        );
        check(
            json!({"minProperties": 1, "maxProperties": 1}),
            &[json!({"a": 1})],
            &[json!({}), json!({"a": 1, "b": 2})],
        );
    }

    #[test]
    fn strings_count_characters_not_bytes() {
        check(
            json!({"type": "string", "maxLength": 2}),
            &[json!("éé"), json!("")],
            &[json!("ééé")],
        );
    }

    #[test]
    fn arrays() {
        check(
            json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2, "uniqueItems": true}),
            &[json!(["a"]), json!(["a", "b"])],
            &[
                json!([]),
                json!(["a", "a"]),
                json!(["a", "b", "c"]),
                json!([1]),
            ],
        );
        check(
            json!({"uniqueItems": true}),
            &[json!([1, 2])],
            &[json!([1, 1.0]), json!([{"a": 1}, {"a": 1}])],
        );
    }

    #[test]
    fn numbers() {
        check(
            json!({"exclusiveMinimum": 0, "exclusiveMaximum": 1}),
            &[json!(0.5)],
            &[json!(0), json!(1)],
        );
        check(
            json!({"multipleOf": 0.5}),
            &[json!(1.5), json!(2)],
            &[json!(1.2)],
        );
    }

    #[test]
    fn enums_consts_and_combinators() {
        check(
            json!({"enum": ["a", 1]}),
            &[json!("a"), json!(1.0)],
            &[json!("b")],
        );
        check(
            json!({"const": {"x": [1]}}),
            &[json!({"x": [1.0]})],
            &[json!({"x": [2]})],
        );
        check(
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}),
            &[json!("a"), json!(1)],
            &[json!(1.5)],
        );
        check(
            json!({"oneOf": [{"type": "integer"}, {"minimum": 0}]}),
            &[json!(-1), json!(0.5)],
            &[json!(1)],
        );
        check(
            json!({"allOf": [{"minimum": 0}, {"maximum": 1}]}),
            &[json!(0.5)],
            &[json!(2)],
        );
        check(
            json!({"not": {"type": "null"}}),
            &[json!(0)],
            &[json!(null)],
        );
        check(json!(false), &[], &[json!(0)]);
        check(json!(true), &[json!(0)], &[]);
    }

    #[test]
    fn local_references() {
        check(
            json!({"type": "object", "properties": {"order": {"$ref": "#/$defs/Order"}}, "$defs": {"Order": {"enum": ["asc", "desc"]}}}),
            &[json!({"order": "asc"})],
            &[json!({"order": "up"})],
        );
        // A reference cycle is bounded while checking, not followed forever.
        let cyclic =
            Schema::compile(&json!({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}))
                .unwrap();
        assert!(!cyclic.is_valid(&json!(1)));
    }

    #[test]
    fn what_is_outside_the_subset_is_refused_by_name() {
        for (schema, named) in [
            (
                json!({"type": "object", "properties": {"n": {"type": 12}}}),
                "12 is not a JSON Schema type",
            ),
            (
                json!({"type": "object", "$ref": "https://example.com/schema.json"}),
                "local definition",
            ),
            (
                json!({"type": "string", "pattern": "^a"}),
                "\"pattern\" is not supported",
            ),
            (json!({"if": {}, "then": {}}), "is not supported"),
            (json!({"$ref": "#/$defs/missing"}), "names no definition"),
            (json!({"minLength": -1}), "non-negative integer"),
            (json!({"multipleOf": 0}), "greater than 0"),
            (json!({"anyOf": []}), "non-empty array"),
            (json!(7), "object or a boolean"),
        ] {
            let error = Schema::compile(&schema)
                .expect_err(&schema.to_string())
                .to_string();
            assert!(error.contains(named), "{schema}: {error}");
        }
        let mut deep = json!({"type": "string"});
        for _ in 0..40 {
            deep = json!({"items": deep});
        }
        assert!(
            Schema::compile(&deep)
                .unwrap_err()
                .to_string()
                .contains("too deeply")
        );
    }

    #[test]
    fn errors_are_bounded() {
        let compiled = Schema::compile(&json!({"items": {"type": "string"}})).unwrap();
        let many = Value::from(vec![1; 100]);
        assert_eq!(compiled.errors(&many, 3).len(), 3);
    }
}
