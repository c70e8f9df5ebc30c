//! GitHub's published GraphQL schema (tests/fixtures/github/schema.graphql) and what it accepts:
//! a request's document is validated against it and its variables are coerced to the
//! operation's variable types, both with apollo-compiler, so a field, an argument or an input
//! field GitHub does not have (an `id` in a `ProjectV2SingleSelectFieldOptionInput`, say) is
//! refused here as GitHub refuses it. Used by the stand-in for every GraphQL request it gets and
//! by tests/github_schema.rs for every document Whilly can send.

#![allow(dead_code)]

use apollo_compiler::ExecutableDocument;
use apollo_compiler::Schema;
use apollo_compiler::response::JsonMap;
use apollo_compiler::validation::Valid;
use serde_json::{Value, json};
use std::sync::OnceLock;

pub const SCHEMA_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/github/schema.graphql"
);

/// The schema, parsed and validated once per process (about a second unoptimised).
///
/// GitHub's SDL defines two fields of `EnterpriseOwnerInfo` twice
/// (`repositoryDeployKeySetting`, `repositoryDeployKeySettingOrganizations`); apollo-compiler
/// keeps the first definition and says so. Those duplicate field definitions are the only
/// problem let through: anything else wrong with the file fails loudly.
pub fn schema() -> &'static Valid<Schema> {
    static SCHEMA: OnceLock<Valid<Schema>> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let text = std::fs::read_to_string(SCHEMA_PATH)
            .unwrap_or_else(|e| panic!("GitHub's schema at {SCHEMA_PATH}: {e}"));
        let schema = match Schema::parse(text, "github/schema.graphql") {
            Ok(s) => s,
            Err(e) => {
                let other: Vec<String> = e
                    .errors
                    .iter()
                    .map(|d| d.error.to_string())
                    .filter(|m| {
                        !(m.starts_with("duplicate definitions for the `")
                            && m.ends_with("` field of object type `EnterpriseOwnerInfo`"))
                    })
                    .collect();
                assert!(
                    other.is_empty(),
                    "GitHub's schema does not parse:\n{}",
                    other.join("\n")
                );
                e.partial
            }
        };
        schema
            .validate()
            .unwrap_or_else(|e| panic!("GitHub's schema is not valid:\n{}", e.errors))
    })
}

/// Why GitHub would refuse a request before running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `invalidDocument` (the document does not parse or validate) or `variableMismatch` (the
    /// variables do not fit the operation's variable definitions).
    pub code: &'static str,
    pub message: String,
    /// (line, column), 1-based.
    pub locations: Vec<(usize, usize)>,
}

impl Refusal {
    /// As GitHub's GraphQL API words an error (the message is apollo-compiler's).
    pub fn to_json(&self) -> Value {
        json!({
            "message": self.message,
            "locations": self.locations.iter()
                .map(|(line, column)| json!({"line": line, "column": column}))
                .collect::<Vec<_>>(),
            "extensions": {"code": self.code},
        })
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// The document validated against GitHub's schema.
pub fn document(query: &str) -> Result<Valid<ExecutableDocument>, Vec<Refusal>> {
    ExecutableDocument::parse_and_validate(schema(), query, "request.graphql").map_err(|e| {
        e.errors
            .iter()
            .map(|d| Refusal {
                code: "invalidDocument",
                message: d.error.to_string(),
                locations: d
                    .line_column_range()
                    .map(|r| vec![(r.start.line, r.start.column)])
                    .unwrap_or_default(),
            })
            .collect()
    })
}

/// What GitHub checks before it runs a request: the document against the schema, then the
/// variables against the operation's variable definitions (`operation_name` picks the
/// operation of a document with several, as the request's `operationName` does).
pub fn check(
    query: &str,
    operation_name: Option<&str>,
    variables: &Value,
) -> Result<(), Vec<Refusal>> {
    let doc = document(query)?;
    let refused = |message: String| {
        vec![Refusal {
            code: "variableMismatch",
            message,
            locations: Vec::new(),
        }]
    };
    let operation = doc
        .operations
        .get(operation_name)
        .map_err(|e| refused(e.message().to_string()))?;
    let values: JsonMap = match variables {
        Value::Null => JsonMap::new(),
        v => serde_json::from_value(v.clone())
            .map_err(|_| refused(format!("variables must be an object, not {v}")))?,
    };
    apollo_compiler::request::coerce_variable_values(schema(), operation, &values)
        .map(|_| ())
        .map_err(|e| refused(e.message().to_string()))
}

/// The variables the operation declares, by name (without `$`), whether or not the document
/// is valid.
pub fn declared_variables(query: &str, operation_name: Option<&str>) -> Vec<String> {
    let doc =
        ExecutableDocument::parse(schema(), query, "request.graphql").unwrap_or_else(|e| e.partial);
    doc.operations
        .get(operation_name)
        .map(|op| op.variables.iter().map(|v| v.name.to_string()).collect())
        .unwrap_or_default()
}
