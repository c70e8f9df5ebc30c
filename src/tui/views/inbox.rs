//! The inbox view: the selection, the marks for a batch decision, the item being read. It takes
//! the keys that move and mark; the decisions themselves are console-wide (they act on the
//! selection wherever it is).

use crate::tui::action::Action;
use crate::tui::model::{InboxDetail, InboxItem};
use std::collections::BTreeSet;

/// The keys the inbox answers itself.
pub(crate) const OWN: &[Action] = &[
    Action::MoveUp,
    Action::MoveDown,
    Action::First,
    Action::Last,
    Action::Zoom,
    Action::Mark,
    Action::ScrollUp,
    Action::ScrollDown,
];

/// The inbox: the selected item, the marked ones, the item being read and its detail.
#[derive(Debug, Clone, Default)]
pub struct InboxView {
    pub selected: usize,
    /// Task pks marked for a batch decision.
    pub marked: BTreeSet<i64>,
    /// The item being read (its detail replaces the list).
    pub open: Option<i64>,
    pub detail: Option<InboxDetail>,
}

/// What the inbox did with a key.
#[derive(Debug, Clone, PartialEq)]
pub enum InboxKey {
    /// Open this item (load its detail).
    Open(InboxItem),
    /// There is nothing to open.
    NothingToOpen,
    /// The item being read was closed (the list is back).
    Closed,
    /// Taken: the selection or the marks changed.
    Took,
    /// Not the inbox's key.
    Passed,
}

impl InboxView {
    /// `items`: the inbox as it is now, in its order.
    pub fn key(&mut self, action: &Action, items: &[InboxItem]) -> InboxKey {
        let last = items.len().saturating_sub(1);
        match action {
            Action::Back if self.open.is_some() => {
                self.open = None;
                self.detail = None;
                InboxKey::Closed
            }
            // Reading an item: the other keys scroll it or decide on it (console-wide).
            _ if self.open.is_some() => InboxKey::Passed,
            Action::Zoom => match items.get(self.selected) {
                Some(item) => {
                    self.open = Some(item.task_pk);
                    self.detail = None;
                    InboxKey::Open(item.clone())
                }
                None => InboxKey::NothingToOpen,
            },
            Action::Mark => {
                let Some(item) = items.get(self.selected) else {
                    return InboxKey::Took;
                };
                if !self.marked.remove(&item.task_pk) {
                    self.marked.insert(item.task_pk);
                }
                self.selected = (self.selected + 1).min(last);
                InboxKey::Took
            }
            Action::MoveUp => {
                self.selected = self.selected.saturating_sub(1);
                InboxKey::Took
            }
            Action::MoveDown => {
                self.selected = (self.selected + 1).min(last);
                InboxKey::Took
            }
            Action::First => {
                self.selected = 0;
                InboxKey::Took
            }
            Action::Last => {
                self.selected = last;
                InboxKey::Took
            }
            _ => InboxKey::Passed,
        }
    }

    /// Keeps the selection, the marks and the open item within `items` after a reload.
    pub fn follow(&mut self, items: &[InboxItem]) {
        self.selected = self.selected.min(items.len().saturating_sub(1));
        self.marked
            .retain(|pk| items.iter().any(|i| i.task_pk == *pk));
        if let Some(pk) = self.open
            && !items.iter().any(|i| i.task_pk == pk)
        {
            self.open = None;
            self.detail = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::model::InboxKind;
    use crate::tui::views::filter::{FilterEditor, FilterKey};

    fn item(pk: i64) -> InboxItem {
        InboxItem {
            task_pk: pk,
            task_id: format!("T-{pk}"),
            kind: InboxKind::HumanLoop,
            note: String::new(),
        }
    }

    #[test]
    fn the_filter_takes_its_keys_while_typed_and_passes_the_rest() {
        let mut f = FilterEditor::default();
        assert_eq!(
            f.key(&Action::FilterChar('a')),
            FilterKey::Passed,
            "not typing"
        );
        f.editing = true;
        assert_eq!(f.key(&Action::FilterChar('a')), FilterKey::Edited);
        assert_eq!(f.key(&Action::FilterChar('b')), FilterKey::Edited);
        assert_eq!(f.key(&Action::FilterBackspace), FilterKey::Edited);
        assert_eq!(f.text, "a");
        assert_eq!(f.key(&Action::FilterDone), FilterKey::Closed);
        assert!(!f.editing && f.text == "a");
        f.editing = true;
        assert_eq!(f.key(&Action::Help), FilterKey::Passed);
        assert!(!f.editing, "another key ends typing");
        f.editing = true;
        assert_eq!(f.key(&Action::Back), FilterKey::Edited);
        assert!(f.is_empty());
    }

    #[test]
    fn the_inbox_takes_its_keys_and_passes_the_rest() {
        let items = [item(1), item(2), item(3)];
        let mut v = InboxView::default();
        assert_eq!(v.key(&Action::Mark, &items), InboxKey::Took);
        assert!(v.marked.contains(&1));
        assert_eq!(v.selected, 1, "marking moves on");
        assert_eq!(v.key(&Action::Last, &items), InboxKey::Took);
        assert_eq!(v.key(&Action::MoveDown, &items), InboxKey::Took);
        assert_eq!(v.selected, 2);
        assert_eq!(v.key(&Action::Zoom, &items), InboxKey::Open(item(3)));
        assert_eq!(v.open, Some(3));
        assert_eq!(
            v.key(&Action::MoveDown, &items),
            InboxKey::Passed,
            "reading: it scrolls"
        );
        assert_eq!(v.key(&Action::Approve, &items), InboxKey::Passed);
        assert_eq!(v.key(&Action::Back, &items), InboxKey::Closed);
        assert_eq!(
            v.key(&Action::Back, &items),
            InboxKey::Passed,
            "then back leaves"
        );
        assert_eq!(
            InboxView::default().key(&Action::Zoom, &[]),
            InboxKey::NothingToOpen
        );
        v.follow(&items[..1]);
        assert_eq!((v.selected, v.marked.len()), (0, 1));
    }
}
