//! An admin route's JSON body: one object, read into `T`.

use super::http::Response;
use serde::de::DeserializeOwned;

/// `body` as `T`, or 400 `bad_json` saying the body must be `shape`: a
/// JSON object (serde would also take an array of the fields' values, a
/// form no one means), without a field `T` does not have; a field of the
/// wrong type or value is named.
pub(super) fn json_object<T: DeserializeOwned>(body: &[u8], shape: &str) -> Result<T, Response> {
    let bad =
        |why: String| Response::error(400, "bad_json", &format!("the body must be {shape}: {why}"));
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    if !value.is_object() {
        return Err(bad(format!("got {}", kind_of(&value))));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        match e.inner().to_string() {
            why if field == "." || why.starts_with("unknown field") => bad(why),
            why => bad(format!("{field}: {why}")),
        }
    })
}

fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Spec {
        to: String,
    }

    fn error_of(body: &str) -> String {
        let response = json_object::<Spec>(body.as_bytes(), "{\"to\"}").unwrap_err();
        assert_eq!(response.status, 400);
        String::from_utf8(response.body).unwrap()
    }

    #[test]
    fn only_an_object_with_the_fields_is_taken() {
        assert_eq!(
            json_object::<Spec>(br#"{"to": "x"}"#, "").unwrap(),
            Spec { to: "x".into() }
        );
        let refusals = [
            (r#"["x"]"#, "got an array"),
            ("7", "got a number"),
            (
                r#"{"to": "x", "from": 1}"#,
                "unknown field `from`, expected `to`",
            ),
            (
                r#"{"to": 5}"#,
                "to: invalid type: integer `5`, expected a string",
            ),
            ("{}", "missing field `to`"),
            ("{", "EOF while parsing an object at line 1 column 1"),
        ];
        for (body, why) in refusals {
            let message = format!("the body must be {{\"to\"}}: {why}");
            let expected = serde_json::json!({"error": "bad_json", "message": message});
            assert_eq!(error_of(body), expected.to_string(), "{body}");
        }
    }
}
