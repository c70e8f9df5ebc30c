//! How agent panes share the screen: 1 → full, 2 → side by side, 3–4 → 2×2, up to 8 → 4×2 on
//! wide screens or 2×4 on tall ones. Panes beyond [`MAX_PANES`] are not shown in the grid (zoom
//! or Tab reaches them).

use ratatui::layout::Rect;

pub(crate) const MAX_PANES: usize = 8;

/// (columns, rows) of the grid for `n` panes in a `width`×`height` cell area.
pub(crate) fn grid_shape(n: usize, width: u16, height: u16) -> (u16, u16) {
    // A cell is about twice as tall as wide: compare in "visual" units.
    let visual_w = f64::from(width);
    let visual_h = f64::from(height) * 2.0;
    match n.min(MAX_PANES) {
        0 => (0, 0),
        1 => (1, 1),
        2 if visual_w * 2.0 < visual_h => (1, 2),
        2 => (2, 1),
        3 | 4 => (2, 2),
        _ if visual_w >= visual_h * 1.5 => (4, 2),
        _ => (2, 4),
    }
}

/// The rectangles of `n` panes (at most [`MAX_PANES`]) in `area`; a short last row is spread
/// over the full width. Never extends past `area`.
pub(crate) fn pane_rects(area: Rect, n: usize) -> Vec<Rect> {
    let n = n.min(MAX_PANES);
    let (cols, _) = grid_shape(n, area.width, area.height);
    // Only as many rows as the panes fill: 5 panes in a 2-wide grid take 3 rows, not 4.
    let rows = n.div_ceil(usize::from(cols.max(1))) as u16;
    if n == 0 || area.width == 0 || area.height == 0 {
        return vec![Rect::new(area.x, area.y, 0, 0); n];
    }
    let mut out = Vec::with_capacity(n);
    let mut left = n;
    for r in 0..rows {
        if left == 0 {
            break;
        }
        let in_row = left.min(usize::from(cols)) as u16;
        let (y, h) = split(area.y, area.height, rows, r);
        for c in 0..in_row {
            let (x, w) = split(area.x, area.width, in_row, c);
            out.push(Rect::new(x, y, w, h));
        }
        left -= usize::from(in_row);
    }
    out
}

/// Start and length of part `i` of `parts` equal parts of `len` starting at `start`.
fn split(start: u16, len: u16, parts: u16, i: u16) -> (u16, u16) {
    let parts = u32::from(parts.max(1));
    let a = u32::from(len) * u32::from(i) / parts;
    let b = u32::from(len) * (u32::from(i) + 1) / parts;
    (start + a as u16, (b - a) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_count_and_aspect() {
        assert_eq!(grid_shape(1, 80, 24), (1, 1));
        assert_eq!(grid_shape(2, 80, 24), (2, 1));
        assert_eq!(grid_shape(2, 20, 40), (1, 2));
        assert_eq!(grid_shape(3, 80, 24), (2, 2));
        assert_eq!(grid_shape(4, 80, 24), (2, 2));
        assert_eq!(grid_shape(8, 200, 40), (4, 2));
        assert_eq!(grid_shape(6, 100, 60), (2, 4));
        assert_eq!(grid_shape(20, 200, 40), (4, 2));
    }

    #[test]
    fn rects_tile_the_area_without_overlap() {
        for (w, h) in [(1, 1), (7, 3), (80, 24), (200, 60), (13, 50)] {
            let area = Rect::new(3, 2, w, h);
            for n in 0..=12 {
                let rects = pane_rects(area, n);
                assert_eq!(rects.len(), n.min(MAX_PANES));
                let cells: u32 = rects.iter().map(|r| r.area()).sum();
                let (cols, _) = grid_shape(n, w, h);
                let rows = n.min(MAX_PANES).div_ceil(usize::from(cols.max(1))) as u16;
                if n > 0 && cols <= w && rows <= h {
                    assert_eq!(cells, area.area(), "{w}x{h} n={n}");
                }
                for (i, a) in rects.iter().enumerate() {
                    assert!(
                        area.union(*a) == area || a.area() == 0,
                        "{a:?} outside {area:?}"
                    );
                    for b in &rects[i + 1..] {
                        assert!(!a.intersects(*b), "{a:?} overlaps {b:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn three_panes_spread_the_last_row() {
        let rects = pane_rects(Rect::new(0, 0, 80, 20), 3);
        assert_eq!(rects[2], Rect::new(0, 10, 80, 10));
    }
}
