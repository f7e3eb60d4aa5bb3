//! `pacerelle answer`: answer a question from this terminal, acting as a device.

use anyhow::{Result, anyhow, bail};
use pacerelle_client::{Answer, OpenedQuestion, QuestionKind, answer_text};

use crate::Global;
use crate::home;
use crate::output;

#[derive(Debug, clap::Args)]
pub struct AnswerArgs {
    /// The question's id, as `pacerelle inbox` shows it.
    question_id: String,
    /// `yes` or `no`; or the chosen option(s) of a choice question; or the words of a text answer.
    #[arg(value_name = "ANSWER")]
    values: Vec<String>,
    /// A written answer (for a text question).
    #[arg(long, conflicts_with = "values")]
    text: Option<String>,
}

/// Turns the command line into an answer that fits the question.
fn to_answer(q: &OpenedQuestion, values: &[String], text: Option<String>) -> Result<Answer> {
    if let Some(text) = text {
        return Ok(Answer::Text(text));
    }
    if values.is_empty() {
        bail!(
            "give an answer: {}",
            match q.kind {
                QuestionKind::YesNo => "yes or no".to_string(),
                QuestionKind::Choice => format!("one of {}", q.options.join(", ")),
                QuestionKind::Text => "--text TEXT".to_string(),
            }
        );
    }
    match q.kind {
        QuestionKind::YesNo => match values {
            [one] => match one.to_lowercase().as_str() {
                "yes" | "y" => Ok(Answer::Yes),
                "no" | "n" => Ok(Answer::No),
                _ => bail!("answer yes or no"),
            },
            _ => bail!("answer yes or no"),
        },
        QuestionKind::Choice => values
            .iter()
            .map(|v| {
                if q.options.contains(v) {
                    return Ok(v.clone());
                }
                let folded: Vec<&String> = q
                    .options
                    .iter()
                    .filter(|o| o.to_lowercase() == v.to_lowercase())
                    .collect();
                match folded.as_slice() {
                    [one] => Ok((*one).clone()),
                    _ => Err(anyhow!(
                        "{v:?} is not one of the options: {}",
                        q.options.join(", ")
                    )),
                }
            })
            .collect::<Result<Vec<_>>>()
            .map(Answer::Options),
        QuestionKind::Text => Ok(Answer::Text(values.join(" "))),
    }
}

pub async fn answer(global: &Global, args: AnswerArgs) -> Result<()> {
    let device = home::device_client(global)?;
    // Reading the questions first lets the client refuse locally an answer that cannot count.
    let list = device.questions(None).await?;
    let q = list
        .questions
        .iter()
        .find(|q| q.question_id == args.question_id)
        .ok_or_else(|| {
            if list.rejected.iter().any(|r| r.message_id == args.question_id) {
                anyhow!(
                    "question {} did not open (altered, or not for this device)",
                    args.question_id
                )
            } else {
                anyhow!(
                    "no question {} for this device: see `pacerelle inbox`",
                    args.question_id
                )
            }
        })?;
    let answer = to_answer(q, &args.values, args.text)?;
    let answered = device.answer(&args.question_id, answer.clone()).await?;
    if global.json {
        output::json(&serde_json::json!({
            "questionId": answered.question_id,
            "state": answered.state,
            "answer": answer,
            "answerText": answer_text(&answer),
            "answeredAt": answered.answered_at,
        }))
    } else {
        println!("answered {}: {}", answered.question_id, answer_text(&answer));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_client::{QuestionState, Timestamp};

    fn q(kind: QuestionKind, options: &[&str]) -> OpenedQuestion {
        OpenedQuestion {
            question_id: "q".into(),
            question: "?".into(),
            kind,
            options: options.iter().map(|s| s.to_string()).collect(),
            multiple: true,
            details: None,
            state: QuestionState::Pending,
            expires_at: Timestamp(i64::MAX),
            answered_by: None,
            answered_at: None,
            answered_by_name: None,
            answer: None,
            created_at: Timestamp(0),
            digest: String::new(),
            answer_key: None,
        }
    }

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn words_become_answers() {
        let yn = q(QuestionKind::YesNo, &[]);
        assert_eq!(to_answer(&yn, &v(&["YES"]), None).expect("yes"), Answer::Yes);
        assert_eq!(to_answer(&yn, &v(&["n"]), None).expect("no"), Answer::No);
        assert!(to_answer(&yn, &v(&["maybe"]), None).is_err());
        assert!(to_answer(&yn, &[], None).is_err());

        let choice = q(QuestionKind::Choice, &["Staging", "prod"]);
        assert_eq!(
            to_answer(&choice, &v(&["staging", "prod"]), None).expect("options"),
            Answer::Options(v(&["Staging", "prod"]))
        );
        assert!(to_answer(&choice, &v(&["dev"]), None).is_err());

        let text = q(QuestionKind::Text, &[]);
        assert_eq!(
            to_answer(&text, &v(&["after", "lunch"]), None).expect("text"),
            Answer::Text("after lunch".into())
        );
        assert_eq!(
            to_answer(&text, &[], Some("ok".into())).expect("text"),
            Answer::Text("ok".into())
        );
    }
}
