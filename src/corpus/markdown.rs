//! Markdown to sections and blocks with pulldown-cmark (CommonMark plus tables), whose events
//! carry their byte ranges in the file, so each passage keeps its span of the file. The first
//! heading titles the document; each later heading opens a section.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::document::{collapse_space, Block, Parsed};

pub fn parse(text: &str) -> Parsed {
    let mut parsed = Parsed {
        source: text.to_string(),
        ..Parsed::default()
    };
    let mut block = Block::default();
    // The heading being read, if inside one.
    let mut heading: Option<String> = None;
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => {
                parsed.add_block(std::mem::take(&mut block));
                heading = Some(String::new());
            }
            Event::End(TagEnd::Heading(_)) => {
                let text = collapse_space(&heading.take().unwrap_or_default());
                if parsed.title.is_none() {
                    parsed.title = Some(text);
                } else {
                    parsed.open_section(text);
                }
            }
            Event::Text(piece) | Event::Code(piece) => match heading.as_mut() {
                Some(heading) => heading.push_str(&piece),
                None => block.push(&piece, range),
            },
            Event::SoftBreak | Event::HardBreak => match heading.as_mut() {
                Some(heading) => heading.push(' '),
                None => block.push_space(),
            },
            Event::End(TagEnd::TableCell) => block.push_space(),
            // A tight list item's text, then its nested list: the text is a block of its own.
            Event::Start(Tag::Item | Tag::List(_) | Tag::CodeBlock(_) | Tag::BlockQuote(_)) => {
                parsed.add_block(std::mem::take(&mut block));
            }
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Item
                | TagEnd::CodeBlock
                | TagEnd::TableRow
                | TagEnd::TableHead
                | TagEnd::BlockQuote(_),
            ) => parsed.add_block(std::mem::take(&mut block)),
            // Raw HTML, rules, footnote marks, task boxes: not prose.
            _ => {}
        }
    }
    parsed.add_block(block);
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_heading_titles_later_ones_open_sections() {
        let text = "# rag\n\nIntro *text* here.\n\n## Using it\n\n- one `code`\n- two\n\n```sh\n./rag index\n```\n";
        let parsed = parse(text);
        assert_eq!(parsed.title.as_deref(), Some("rag"));
        assert_eq!(parsed.sections[0].heading, None);
        assert_eq!(parsed.sections[0].blocks[0].text, "Intro text here.");
        let using = &parsed.sections[1];
        assert_eq!(using.heading.as_deref(), Some("Using it"));
        let texts: Vec<&str> = using.blocks.iter().map(|b| b.text.as_str()).collect();
        assert_eq!(texts, ["one code", "two", "./rag index\n"]);
        // Spans point into the file.
        let intro = &parsed.sections[0].blocks[0];
        let (s, e) = (
            intro.source_at(0, false),
            intro.source_at(intro.text.len(), true),
        );
        assert_eq!(&text[s..e], "Intro *text* here.");
    }
}
