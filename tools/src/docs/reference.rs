//! The configuration reference: one page per CRD, from the OpenAPI schema
//! of each version in the committed manifests (`config/crd/`).
//!
//! Every field gets a section with its type, whether it is required, its
//! default, its limits (lengths, sizes, bounds, enums, patterns, list and
//! map types) and its CEL rules (`x-kubernetes-validations`) with their
//! messages. A schema keyword this module does not know is an error, so
//! the reference never leaves a validation out without saying so.

use std::fmt::Write as _;

use serde_json::Value;

/// Why the reference could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A manifest could not be read.
    #[error("reading {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// What the OS said.
        error: String,
    },
    /// A manifest is not YAML, or not a CRD.
    #[error("parsing a CRD manifest: {0}")]
    Parse(String),
    /// The schema has something this generator cannot describe.
    #[error("{kind} {version} {path}: {what}")]
    Schema {
        /// The CRD's kind.
        kind: String,
        /// The version whose schema it is.
        version: String,
        /// The field.
        path: String,
        /// What is unknown.
        what: String,
    },
}

/// The reference pages, as (file name, Markdown): `index.md` (the index)
/// and `<plural>.md` per CRD, ordered by kind. `manifests` are the texts
/// of the CRD files, in any order.
pub fn pages(manifests: &[String]) -> Result<Vec<(String, String)>, Error> {
    let mut crds = manifests
        .iter()
        .map(|text| Crd::parse(text))
        .collect::<Result<Vec<_>, _>>()?;
    crds.sort_by(|a, b| a.kind.cmp(&b.kind));
    let mut out = vec![("index.md".to_owned(), index(&crds))];
    for crd in &crds {
        out.push((format!("{}.md", crd.plural), crd.page()?));
    }
    Ok(out)
}

/// The command that regenerates the pages, named in each of them.
pub const REGENERATE: &str = "cargo run -p ferrolb-tools --bin ferrolb-docs";

/// Schema keywords this module describes; any other one is an error.
const KNOWN: [&str; 22] = [
    "additionalProperties",
    "default",
    "description",
    "enum",
    "format",
    "items",
    "maxItems",
    "maxLength",
    "maximum",
    "minItems",
    "minLength",
    "minimum",
    "nullable",
    "pattern",
    "properties",
    "required",
    "title",
    "type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

/// What the page needs of one CRD manifest.
struct Crd {
    kind: String,
    plural: String,
    group: String,
    scope: String,
    versions: Vec<Value>,
}

impl Crd {
    fn parse(text: &str) -> Result<Self, Error> {
        let doc: Value = serde_saphyr::from_str(text).map_err(|e| Error::Parse(e.to_string()))?;
        let s = |ptr: &str| {
            doc.pointer(ptr)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| Error::Parse(format!("no {ptr}")))
        };
        let versions = doc
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| Error::Parse("no /spec/versions".into()))?;
        Ok(Self {
            kind: s("/spec/names/kind")?,
            plural: s("/spec/names/plural")?,
            group: s("/spec/group")?,
            scope: s("/spec/scope")?,
            versions,
        })
    }

    fn root_description(&self) -> String {
        let stored = self
            .versions
            .iter()
            .find(|v| v["storage"] == Value::Bool(true))
            .or_else(|| self.versions.first());
        stored
            .and_then(|v| v.pointer("/schema/openAPIV3Schema/description"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    }

    fn page(&self) -> Result<String, Error> {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<!-- Generated from config/crd/{}_{}.yaml by ferrolb-docs: do not edit. Regenerate with: {REGENERATE} -->\n",
            self.group, self.plural
        );
        let _ = writeln!(out, "# {}\n", self.kind);
        let names: Vec<String> = self
            .versions
            .iter()
            .map(|v| {
                let name = v["name"].as_str().unwrap_or("?");
                if v["storage"] == Value::Bool(true) {
                    format!("`{name}` (stored)")
                } else {
                    format!("`{name}`")
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "`{}.{}`, {}; served versions: {}. Manifest: `config/crd/{}_{}.yaml` \
             (also in the Helm chart's `crds/`).\n",
            self.plural,
            self.group,
            scope_text(&self.scope),
            names.join(", "),
            self.group,
            self.plural
        );
        let desc = self.root_description();
        if !desc.is_empty() {
            let _ = writeln!(out, "{}\n", text(&desc));
        }
        for version in &self.versions {
            self.version(&mut out, version)?;
        }
        Ok(out)
    }

    fn version(&self, out: &mut String, v: &Value) -> Result<(), Error> {
        let name = v["name"].as_str().unwrap_or("?").to_owned();
        let _ = writeln!(out, "## {name} {{#{name}}}\n");
        if let Some(w) = v["deprecationWarning"].as_str() {
            let _ = writeln!(out, "Deprecated: the apiserver warns \"{}\".\n", text(w));
        }
        if v["storage"] != Value::Bool(true) {
            let _ = writeln!(
                out,
                "Served, not stored: the apiserver converts it to the stored version \
                 (strategy `None`: only `apiVersion` changes).\n"
            );
        }
        if v.pointer("/subresources/status").is_some() {
            let _ = writeln!(
                out,
                "`status` is a subresource: `kubectl apply` of the object leaves it alone.\n"
            );
        }
        if let Some(cols) = v["additionalPrinterColumns"].as_array() {
            let _ = writeln!(out, "Columns of `kubectl get {}`:\n", self.plural);
            let _ = writeln!(out, "| Column | Type | From |\n|---|---|---|");
            for c in cols {
                let _ = writeln!(
                    out,
                    "| {} | {} | `{}` |",
                    c["name"].as_str().unwrap_or(""),
                    c["type"].as_str().unwrap_or(""),
                    c["jsonPath"].as_str().unwrap_or("")
                );
            }
            out.push('\n');
        }
        let schema = v
            .pointer("/schema/openAPIV3Schema")
            .ok_or_else(|| Error::Parse(format!("{} {name}: no openAPIV3Schema", self.kind)))?;
        let mut fields = Vec::new();
        let ctx = Ctx {
            kind: &self.kind,
            version: &name,
        };
        ctx.check_keys("(root)", schema)?;
        let root_rules = rules(schema);
        if !root_rules.is_empty() {
            let _ = writeln!(out, "Rules on the whole object:\n");
            write_rules(out, &root_rules);
        }
        let required = required_of(schema);
        if let Some(props) = schema["properties"].as_object() {
            for (key, sub) in props {
                if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                ctx.walk(key, sub, required.contains(key), &mut fields)?;
            }
        }
        let _ = writeln!(out, "### Fields of {name} {{#{name}-fields}}\n");
        let _ = writeln!(
            out,
            "| Field | Type | Required | Default |\n|---|---|---|---|"
        );
        for f in &fields {
            let _ = writeln!(
                out,
                "| [<code>{}</code>](#{}) | {} | {} | {} |",
                breakable(&f.path),
                anchor(&name, &f.path),
                f.ty,
                if f.required { "yes" } else { "no" },
                f.default
                    .as_deref()
                    .map_or("-".into(), |d| format!("`{d}`"))
            );
        }
        out.push('\n');
        for f in &fields {
            f.write(out, &name);
        }
        Ok(())
    }
}

/// One field's entry.
struct Field {
    path: String,
    ty: String,
    required: bool,
    default: Option<String>,
    description: String,
    facts: Vec<String>,
    rules: Vec<Rule>,
}

impl Field {
    fn write(&self, out: &mut String, version: &str) {
        let _ = writeln!(
            out,
            "#### `{}` {{#{}}}\n",
            self.path,
            anchor(version, &self.path)
        );
        if !self.description.is_empty() {
            let _ = writeln!(out, "{}\n", text(&self.description));
        }
        let _ = writeln!(out, "- Type: {}", self.ty);
        let _ = writeln!(
            out,
            "- Required: {}",
            if self.required { "yes" } else { "no" }
        );
        if let Some(d) = &self.default {
            let _ = writeln!(out, "- Default: `{d}`");
        }
        for fact in &self.facts {
            let _ = writeln!(out, "- {}", capitalize(fact));
        }
        out.push('\n');
        if !self.rules.is_empty() {
            let _ = writeln!(out, "Rules (CEL, checked by the apiserver):\n");
            write_rules(out, &self.rules);
        }
    }
}

/// One `x-kubernetes-validations` entry, and what it applies to.
struct Rule {
    on: &'static str,
    rule: String,
    message: Option<String>,
    message_expression: Option<String>,
    reason: Option<String>,
    field_path: Option<String>,
}

struct Ctx<'a> {
    kind: &'a str,
    version: &'a str,
}

impl Ctx<'_> {
    fn err(&self, path: &str, what: String) -> Error {
        Error::Schema {
            kind: self.kind.to_owned(),
            version: self.version.to_owned(),
            path: path.to_owned(),
            what,
        }
    }

    fn check_keys(&self, path: &str, schema: &Value) -> Result<(), Error> {
        let obj = schema
            .as_object()
            .ok_or_else(|| self.err(path, "schema is not an object".into()))?;
        for key in obj.keys() {
            if !KNOWN.contains(&key.as_str()) {
                return Err(self.err(path, format!("unknown schema keyword `{key}`")));
            }
        }
        Ok(())
    }

    /// Adds the field at `path` and every field under it.
    fn walk(
        &self,
        path: &str,
        schema: &Value,
        required: bool,
        out: &mut Vec<Field>,
    ) -> Result<(), Error> {
        self.check_keys(path, schema)?;
        let mut facts = limits(schema, "");
        let mut field_rules: Vec<Rule> = rules(schema);
        let mut description = str_of(schema, "description");
        if let Some(title) = schema["title"].as_str() {
            description = format!("{title}. {description}");
        }
        // Scalars inside arrays and maps are described with their container;
        // objects inside them get fields of their own (`path[*].x`, `path.*.x`).
        let mut nested: Vec<(String, &Value)> = Vec::new();
        for (key, suffix, each) in [
            ("items", "[*]", "each item"),
            ("additionalProperties", ".*", "each value"),
        ] {
            let Some(inner) = schema.get(key).filter(|v| v.is_object()) else {
                continue;
            };
            let inner_path = format!("{path}{suffix}");
            self.check_keys(&inner_path, inner)?;
            facts.extend(limits(inner, each));
            let inner_desc = str_of(inner, "description");
            if !inner_desc.is_empty() && inner_desc != description {
                facts.push(format!(
                    "{} is: {}",
                    capitalize(each),
                    one_line(&inner_desc)
                ));
            }
            for mut r in rules(inner) {
                r.on = if key == "items" {
                    "each item"
                } else {
                    "each value"
                };
                field_rules.push(r);
            }
            if inner.get("properties").is_some() {
                nested.push((inner_path, inner));
            }
        }
        out.push(Field {
            path: path.to_owned(),
            ty: type_of(schema),
            required,
            default: schema.get("default").map(literal),
            description,
            facts,
            rules: field_rules,
        });
        if let Some(props) = schema["properties"].as_object() {
            let req = required_of(schema);
            for (key, sub) in props {
                self.walk(&format!("{path}.{key}"), sub, req.contains(key), out)?;
            }
        }
        for (inner_path, inner) in nested {
            let req = required_of(inner);
            if let Some(props) = inner["properties"].as_object() {
                for (key, sub) in props {
                    self.walk(&format!("{inner_path}.{key}"), sub, req.contains(key), out)?;
                }
            }
        }
        Ok(())
    }
}

fn index(crds: &[Crd]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- Generated from config/crd/ by ferrolb-docs: do not edit. Regenerate with: {REGENERATE} -->\n"
    );
    let _ = writeln!(out, "# Configuration reference\n");
    let _ = writeln!(
        out,
        "Every kind of the `metallb.io` group that ferrolb installs, field by field: \
         type, whether it is required, default, limits and the CEL rules the \
         apiserver checks (ferrolb runs no admission webhook: what the CRDs refuse \
         never reaches the programs, and what they take is validated again by the \
         controller and the speaker, which name the object and field of every \
         problem in a ConfigurationState and an Event).\n\n\
         These pages are generated from the OpenAPI schemas of the manifests in \
         `config/crd/` (`{REGENERATE}`); a test fails when they drift.\n"
    );
    let _ = writeln!(
        out,
        "| Kind | Versions | Scope | What it is |\n|---|---|---|---|"
    );
    for crd in crds {
        let versions: Vec<&str> = crd
            .versions
            .iter()
            .filter_map(|v| v["name"].as_str())
            .collect();
        let _ = writeln!(
            out,
            "| [{}]({}.md) | {} | {} | {} |",
            crd.kind,
            crd.plural,
            versions.join(", "),
            crd.scope,
            one_line(&crd.root_description())
        );
    }
    out
}

fn scope_text(scope: &str) -> &'static str {
    if scope == "Namespaced" {
        "namespaced (ferrolb reads them in its own namespace, `metallb-system` by default)"
    } else {
        "cluster-scoped"
    }
}

fn required_of(schema: &Value) -> Vec<String> {
    schema["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn str_of(schema: &Value, key: &str) -> String {
    schema[key].as_str().unwrap_or("").to_owned()
}

fn type_of(schema: &Value) -> String {
    let base = match schema["type"].as_str() {
        Some("array") => match schema.get("items") {
            Some(items) => format!("array of {}", type_of(items)),
            None => "array".into(),
        },
        Some("object") => match (schema.get("properties"), schema.get("additionalProperties")) {
            (None, Some(v)) if v.is_object() => format!("map of string to {}", type_of(v)),
            _ => "object".into(),
        },
        Some(t) => match schema["format"].as_str() {
            Some(f) => format!("{t} ({f})"),
            None => t.to_owned(),
        },
        None => "any".into(),
    };
    if schema["nullable"] == Value::Bool(true) {
        format!("{base}, nullable")
    } else {
        base
    }
}

/// The limits of one schema node, as sentences; `each` names the element
/// they apply to ("" for the field itself).
fn limits(schema: &Value, each: &str) -> Vec<String> {
    let who = if each.is_empty() {
        String::new()
    } else {
        format!("{}: ", capitalize(each))
    };
    let num = |k: &str| schema.get(k).map(number);
    let mut facts = Vec::new();
    if !each.is_empty() {
        facts.push(format!("{who}type {}", type_of(schema)));
    }
    if let Some(n) = num("minLength") {
        facts.push(format!("{who}at least {n} characters"));
    }
    if let Some(n) = num("maxLength") {
        facts.push(format!("{who}at most {n} characters"));
    }
    if let Some(n) = num("minItems") {
        facts.push(format!("{who}at least {n} items"));
    }
    if let Some(n) = num("maxItems") {
        facts.push(format!("{who}at most {n} items"));
    }
    if let Some(n) = num("minimum") {
        facts.push(format!("{who}minimum {n}"));
    }
    if let Some(n) = num("maximum") {
        facts.push(format!("{who}maximum {n}"));
    }
    if let Some(p) = schema["pattern"].as_str() {
        facts.push(format!("{who}matches the pattern `{}`", code(p)));
    }
    if let Some(values) = schema["enum"].as_array() {
        let list: Vec<String> = values.iter().map(|v| format!("`{}`", plain(v))).collect();
        facts.push(format!("{who}one of {}", list.join(", ")));
    }
    if let Some(t) = schema["x-kubernetes-list-type"].as_str() {
        facts.push(format!(
            "{who}list type `{t}` (how server-side apply merges it)"
        ));
    }
    if let Some(keys) = schema["x-kubernetes-list-map-keys"].as_array() {
        let list: Vec<String> = keys.iter().map(|v| format!("`{}`", plain(v))).collect();
        facts.push(format!("{who}list map keys {}", list.join(", ")));
    }
    if let Some(t) = schema["x-kubernetes-map-type"].as_str() {
        facts.push(format!(
            "{who}map type `{t}` (how server-side apply merges it)"
        ));
    }
    if let Some(d) = schema.get("default").filter(|_| !each.is_empty()) {
        facts.push(format!("{who}default `{}`", literal(d)));
    }
    facts
}

fn rules(schema: &Value) -> Vec<Rule> {
    let Some(list) = schema["x-kubernetes-validations"].as_array() else {
        return Vec::new();
    };
    list.iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().map(str::to_owned);
            Rule {
                on: "the field",
                rule: s("rule").unwrap_or_default(),
                message: s("message"),
                message_expression: s("messageExpression"),
                reason: s("reason"),
                field_path: s("fieldPath"),
            }
        })
        .collect()
}

fn write_rules(out: &mut String, rules: &[Rule]) {
    for (i, r) in rules.iter().enumerate() {
        let said = match (&r.message, &r.message_expression) {
            (Some(m), _) => format!("refused with “{}”", text(m)),
            (None, Some(expr)) => match messages(expr) {
                Some(list) => format!(
                    "refused with {}",
                    list.iter()
                        .map(|m| format!("“{}”", text(m)))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
                None => "refused with a message built by the expression below".into(),
            },
            (None, None) => "refused with the rule's text".into(),
        };
        let _ = write!(out, "{}. On {}: {said}", i + 1, r.on);
        if let Some(reason) = &r.reason {
            let _ = write!(out, " (reason `{reason}`)");
        }
        if let Some(fp) = &r.field_path {
            let _ = write!(out, " (reported at `{fp}`)");
        }
        out.push_str(".\n\n");
        let _ = writeln!(
            out,
            "   <details><summary>CEL rule ({} characters)</summary>\n",
            r.rule.chars().count()
        );
        let _ = writeln!(out, "   ```text\n   {}\n   ```\n", r.rule);
        if let Some(m) = &r.message_expression {
            let _ = writeln!(out, "   Message expression:\n");
            let _ = writeln!(out, "   ```text\n   {m}\n   ```\n");
        }
        let _ = writeln!(out, "   </details>\n");
    }
}

/// The messages a `messageExpression` of the shape `'prefix' + self + 'a'`
/// or `'prefix' + self + (cond ? 'a' : 'b')` can give, with the value shown
/// as `VALUE`; `None` for any other shape (then only the expression is
/// shown).
fn messages(expr: &str) -> Option<Vec<String>> {
    let (prefix, rest) = expr.split_once(" + self + ")?;
    let prefix = single_quoted(prefix.trim())?;
    let alternatives: Vec<String> = literals(rest)
        .into_iter()
        // Regular expressions in the condition are not messages.
        .filter(|l| !l.starts_with("(?"))
        .collect();
    if alternatives.is_empty() {
        return None;
    }
    Some(
        alternatives
            .iter()
            .map(|a| format!("{prefix}VALUE{a}"))
            .collect(),
    )
}

/// The text of a CEL string literal that is the whole of `s`.
fn single_quoted(s: &str) -> Option<String> {
    let inner = s.strip_prefix('\'')?.strip_suffix('\'')?;
    (!inner.contains('\'')).then(|| inner.replace("\\\"", "\""))
}

/// Every single-quoted CEL string literal in `s`, in order.
fn literals(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (&mut current, c) {
            (None, '\'') => current = Some(String::new()),
            (Some(lit), '\\') => {
                if let Some(next) = chars.next() {
                    lit.push(next);
                }
            }
            (Some(_), '\'') => out.extend(current.take()),
            (Some(lit), c) => lit.push(c),
            (None, _) => {}
        }
    }
    out
}

/// The HTML id of a field's section: version, then the path with every
/// character other than a letter or digit made a `-`.
pub fn anchor(version: &str, path: &str) -> String {
    let path = path.replace("[*]", "-items").replace(".*", "-values");
    let mut id = format!("{version}-");
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c.to_ascii_lowercase());
        } else {
            id.push('-');
        }
    }
    id
}

/// A field path as inline HTML that a narrow table cell may break after
/// each `.` and before each `[`; the characters Markdown would read (`*`,
/// `[`, `]`) as entities.
fn breakable(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        match c {
            '.' => out.push_str(".<wbr>"),
            '[' => out.push_str("<wbr>&#91;"),
            ']' => out.push_str("&#93;"),
            '*' => out.push_str("&#42;"),
            c => out.push(c),
        }
    }
    out
}

/// Description text made safe for Markdown: no raw HTML.
fn text(s: &str) -> String {
    s.trim().replace('<', "&lt;").replace('>', "&gt;")
}

fn one_line(s: &str) -> String {
    text(s)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// Inline code that may itself hold backticks or pipes.
fn code(s: &str) -> String {
    s.replace('`', "'").replace('|', "\\|")
}

/// A number as written in the manifest: YAML's `2` may parse as 2.0.
fn number(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("{}", f as i64),
        _ => v.to_string(),
    }
}

/// A value as JSON, numbers as written in the manifest.
fn literal(v: &Value) -> String {
    if v.is_number() {
        number(v)
    } else {
        v.to_string()
    }
}

fn plain(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.io
spec:
  group: example.io
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        description: A widget.
        properties:
          spec:
            properties:
              size:
                default: 3
                maximum: 10
                minimum: 1
                type: integer
                format: int32
              tags:
                items:
                  maxLength: 8
                  type: string
                  x-kubernetes-validations:
                  - message: no spaces
                    rule: "!self.contains(' ')"
                maxItems: 4
                type: array
            required: [size]
            type: object
        type: object
"#;

    #[test]
    fn every_limit_and_rule_is_written() {
        let pages = pages(&[CRD.to_owned()]).unwrap();
        assert_eq!(pages[0].0, "index.md");
        assert!(
            pages[0]
                .1
                .contains("| [Widget](widgets.md) | v1 | Namespaced | A widget. |")
        );
        let page = &pages[1].1;
        assert!(page.contains(
            "| [<code>spec.<wbr>size</code>](#v1-spec-size) | integer (int32) | yes | `3` |"
        ));
        assert!(
            page.contains("- Default: `3`\n- Minimum 1\n- Maximum 10\n"),
            "{page}"
        );
        assert!(page.contains("- At most 4 items\n"));
        assert!(page.contains("- Each item: at most 8 characters\n"));
        assert!(page.contains("1. On each item: refused with “no spaces”."));
        assert!(page.contains("!self.contains(' ')"));
    }

    #[test]
    fn an_unknown_keyword_is_an_error() {
        let crd = CRD.replace("maxItems: 4", "uniqueItems: true");
        let err = pages(&[crd]).unwrap_err().to_string();
        assert!(
            err.contains("unknown schema keyword `uniqueItems`"),
            "{err}"
        );
    }

    #[test]
    fn message_expressions_become_their_messages() {
        let expr = r#"'peerAddress "' + self + (self.matches('(?i):ffff:[0-9]+[.]') ? '" is an IPv4-mapped IPv6 address: write it as IPv4' : '" is not an IP address')"#;
        assert_eq!(
            messages(expr).unwrap(),
            [
                "peerAddress \"VALUE\" is an IPv4-mapped IPv6 address: write it as IPv4",
                "peerAddress \"VALUE\" is not an IP address"
            ]
        );
        assert_eq!(
            messages(r#"'"' + self + '" is a reversed range'"#).unwrap(),
            ["\"VALUE\" is a reversed range"]
        );
        assert_eq!(messages("self.size() > 3 ? 'a' : 'b'"), None);
    }

    #[test]
    fn anchors_are_plain() {
        assert_eq!(
            anchor("v1beta1", "spec.nodeSelectors[*].matchLabels.*"),
            "v1beta1-spec-nodeselectors-items-matchlabels-values"
        );
    }
}
