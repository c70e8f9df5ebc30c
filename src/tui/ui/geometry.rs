//! Where a popup goes on the screen.

use ratatui::layout::Rect;

/// A rectangle of at most `w`×`h` centred in `area`.
pub(super) fn centred(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}
