//! The hyperlinks of the HotpotQA Wikipedia dump: its `text_with_links` sentences carry them as
//! `<a href="Target%20title">anchor</a>`. Kept per paragraph as the titles they point to: the
//! real version of the title mentions the second hop looks for.

use percent_encoding::percent_decode_str;

/// The distinct link targets of `sentences`, in order of first appearance: each `href`
/// percent-decoded, underscores read as spaces and the first letter capitalised, as Wikipedia
/// resolves a link to a title. Anchors without a target, and section links within the same
/// article (`#...`), are left out.
pub fn targets<'a>(sentences: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for sentence in sentences {
        for href in hrefs(sentence) {
            let decoded = percent_decode_str(href).decode_utf8_lossy();
            let decoded = crate::corpus::decode_entities(decoded.into_owned());
            // The part before a `#` names the article; a bare `#section` names this one.
            let title = decoded.split('#').next().unwrap_or("").replace('_', " ");
            let title = capitalised(title.trim());
            if !title.is_empty() && !out.contains(&title) {
                out.push(title);
            }
        }
    }
    out
}

/// The `href` values of the `<a ...>` tags of `text`, quoted with `"` or `'`.
fn hrefs(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("<a ").filter_map(move |(at, _)| {
        let tag = &text[at..];
        let tag = &tag[..tag.find('>')?];
        let value = &tag[tag.find("href=")? + 5..];
        let quote = value.chars().next().filter(|q| *q == '"' || *q == '\'')?;
        let value = &value[1..];
        Some(&value[..value.find(quote)?])
    })
}

fn capitalised(title: &str) -> String {
    let mut chars = title.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_decoded_capitalised_and_distinct() {
        let sentences = [
            "<a href=\"Political%20philosophy\">political philosophy</a> that rejects <a href=\"hierarchy\">hierarchies</a>.",
            " See <a href=\"Political%20philosophy\">again</a>, <a href='Caf%C3%A9_society#History'>cafés</a>, <a href=\"#Notes\">notes</a> and <a name=\"x\">none</a>.",
            " <a href=\"AT%26amp%3BT\">AT&T</a> <a href=\"broken",
        ];
        assert_eq!(
            targets(sentences),
            ["Political philosophy", "Hierarchy", "Café society", "AT&T"]
        );
        assert!(targets(["no links here"]).is_empty());
    }
}
