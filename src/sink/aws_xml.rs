//! The little goad reads of AWS's XML answers: a field of STS's (query
//! protocol) and the code and message of an error (STS's, S3's, and an
//! SQS endpoint's that answers in XML), each the plain text between a
//! tag's first opening and its close.

/// The text of the first `<tag>` element of `xml` (credential fields and
/// error codes are plain text: no markup, no entities).
pub(super) fn text<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let start = xml.find(&format!("<{tag}>"))? + tag.len() + 2;
    let length = xml[start..].find(&format!("</{tag}>"))?;
    Some(&xml[start..start + length])
}

/// An AWS error answer's `<Code>`, if it is one.
pub(crate) fn code(answer: &[u8]) -> Option<&str> {
    text(std::str::from_utf8(answer).ok()?, "Code")
}

/// An AWS error answer's `<Code>` and `<Message>` as one line
/// (`NoSuchBucket: The specified bucket does not exist`), the five XML
/// entities read; `None` when `answer` holds no `<Code>`.
pub(super) fn error(answer: &[u8]) -> Option<String> {
    let xml = String::from_utf8_lossy(answer);
    let code = text(&xml, "Code")?;
    let line = match text(&xml, "Message") {
        Some(message) => format!("{code}: {message}"),
        None => code.to_string(),
    };
    let unescaped = [
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&quot;", "\""),
        ("&apos;", "'"),
    ]
    .iter()
    .fold(line, |line, (entity, plain)| line.replace(entity, plain));
    Some(unescaped.replace("&amp;", "&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_the_text_of_its_first_element() {
        let sts = "<R><Credentials><AccessKeyId>ASIA1</AccessKeyId>\
                   <Expiration>2026-12-01T00:18:27.535519Z</Expiration></Credentials></R>";
        assert_eq!(text(sts, "AccessKeyId"), Some("ASIA1"));
        assert_eq!(text(sts, "Expiration"), Some("2026-12-01T00:18:27.535519Z"));
        assert_eq!(text(sts, "SessionToken"), None);
        assert_eq!(text("<Code>unclosed", "Code"), None);
    }

    #[test]
    fn an_error_is_its_code_and_message() {
        // S3's (moto's words) and STS's, as they answer.
        let s3 = b"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<Error><Code>NoSuchBucket</Code>\
                   <Message>The specified bucket does not exist</Message><BucketName>b</BucketName>\
                   <RequestId>Ab1</RequestId></Error>";
        assert_eq!(
            error(s3).as_deref(),
            Some("NoSuchBucket: The specified bucket does not exist")
        );
        let sts = b"<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n  <Error>\n    \
                    <Type>Sender</Type>\n    <Code>AccessDenied</Code>\n    <Message>User: arn:aws:iam::1:user/u \
                    is not authorized to perform: sts:AssumeRole on resource: arn:aws:iam::1:role/&lt;r&gt; \
                    &amp; &quot;more&quot; &apos;s</Message>\n  </Error>\n</ErrorResponse>";
        assert_eq!(
            error(sts).as_deref(),
            Some(
                "AccessDenied: User: arn:aws:iam::1:user/u is not authorized to perform: \
                  sts:AssumeRole on resource: arn:aws:iam::1:role/<r> & \"more\" 's"
            )
        );
        assert_eq!(
            error(b"<Error><Code>SlowDown</Code></Error>").as_deref(),
            Some("SlowDown")
        );
        assert_eq!(error(b"{\"message\": \"not XML\"}"), None);
        assert_eq!(code(s3), Some("NoSuchBucket"));
        assert_eq!(
            code(b"<Error><Code>NoSuchKey</Code></Error>"),
            Some("NoSuchKey")
        );
        assert_eq!(code(b""), None);
        assert_eq!(error(b"&amp;lt;"), None);
    }
}
