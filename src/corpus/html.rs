//! HTML to sections and blocks with scraper (html5ever, the parser browsers' specification
//! describes, which recovers from bad markup as a browser does). `<title>` titles the page;
//! `<h1>`..`<h6>` open sections; scripts, styles and the head are not text. A page that ends
//! inside a tag or comment (a truncated file) is refused as broken: what the browser would show
//! of it is a guess.

use scraper::{ElementRef, Html, Node, Selector};

use super::document::{collapse_space, Block, Parsed};

/// Elements whose content is not text a reader sees.
const HIDDEN: [&str; 8] = [
    "head", "script", "style", "noscript", "template", "iframe", "object", "svg",
];

/// Elements that start and end a block of text.
const BLOCKS: [&str; 30] = [
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "nav",
    "aside",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "pre",
    "blockquote",
    "table",
    "tr",
    "thead",
    "tbody",
    "figure",
    "figcaption",
    "form",
    "hr",
    "address",
    "details",
    "summary",
    "body",
    "caption",
];

pub fn parse(text: &str) -> Result<Parsed, String> {
    let html = Html::parse_document(text);
    if let Some(error) = html.errors.iter().find(|e| e.contains("EOF")) {
        return Err(format!(
            "broken HTML: the file ends inside markup ({error})"
        ));
    }
    let title = Selector::parse("title").ok().and_then(|selector| {
        html.select(&selector)
            .next()
            .map(|t| collapse_space(&t.text().collect::<String>()))
    });
    let mut walker = Walker {
        parsed: Parsed {
            title: title.filter(|t| !t.is_empty()),
            ..Parsed::default()
        },
        block: String::new(),
    };
    walker.walk(html.root_element(), false);
    walker.flush();
    Ok(walker.parsed)
}

/// Collects the text of blocks; each finished block is appended to the extracted text (blocks
/// apart by a blank line), which its source offsets point into.
struct Walker {
    parsed: Parsed,
    block: String,
}

impl Walker {
    fn walk(&mut self, element: ElementRef, preformatted: bool) {
        let name = element.value().name();
        if HIDDEN.contains(&name) {
            return;
        }
        if is_heading(name) {
            self.flush();
            let heading = collapse_space(&element.text().collect::<String>());
            self.parsed.open_section(heading);
            return;
        }
        let is_block = BLOCKS.contains(&name);
        if is_block {
            self.flush();
        }
        let preformatted = preformatted || name == "pre";
        for child in element.children() {
            match child.value() {
                Node::Text(text) => {
                    if preformatted {
                        self.block.push_str(text);
                    } else {
                        self.push_collapsed(text);
                    }
                }
                Node::Element(_) => {
                    let child = ElementRef::wrap(child).expect("an element node");
                    match child.value().name() {
                        "br" => self.block.push('\n'),
                        "td" | "th" => {
                            self.walk(child, preformatted);
                            self.block.push(' ');
                        }
                        _ => self.walk(child, preformatted),
                    }
                }
                _ => {}
            }
        }
        if is_block {
            self.flush();
        }
    }

    fn push_collapsed(&mut self, text: &str) {
        if text.starts_with(char::is_whitespace) && !self.block.ends_with(char::is_whitespace) {
            self.block.push(' ');
        }
        self.block.push_str(&collapse_space(text));
        if text.ends_with(char::is_whitespace) && !text.trim().is_empty() {
            self.block.push(' ');
        }
    }

    fn flush(&mut self) {
        let text = std::mem::take(&mut self.block);
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        if !self.parsed.source.is_empty() {
            self.parsed.source.push_str("\n\n");
        }
        let start = self.parsed.source.len();
        self.parsed.source.push_str(text);
        let mut block = Block::default();
        block.push(text, start..self.parsed.source.len());
        self.parsed.add_block(block);
    }
}

fn is_heading(name: &str) -> bool {
    matches!(name.as_bytes(), [b'h', b'1'..=b'6'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_sections_and_hidden_text() {
        let page = "<!DOCTYPE html><html><head><title> My  page </title><style>p{}</style></head>\
            <body><p>Intro &amp; more.</p><script>var x;</script><h2>Part <b>A</b></h2>\
            <ul><li>one</li><li>two <i>x</i></li></ul><table><tr><td>a</td><td>b</td></tr></table></body></html>";
        let parsed = parse(page).unwrap();
        assert_eq!(parsed.title.as_deref(), Some("My page"));
        assert_eq!(parsed.sections[0].blocks[0].text, "Intro & more.");
        assert_eq!(parsed.sections[1].heading.as_deref(), Some("Part A"));
        let texts: Vec<&str> = parsed.sections[1]
            .blocks
            .iter()
            .map(|b| b.text.as_str())
            .collect();
        assert_eq!(texts, ["one", "two x", "a b"]);
        assert!(parsed.source.starts_with("Intro & more.\n\none"));
    }

    #[test]
    fn a_truncated_page_is_broken() {
        let err = parse("<html><body><p>Text</p><a href=\"x").unwrap_err();
        assert!(err.starts_with("broken HTML"), "{err}");
        let err = parse("<html><body><p>Text</p><!-- never closed").unwrap_err();
        assert!(err.starts_with("broken HTML"), "{err}");
    }
}
