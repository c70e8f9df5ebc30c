//! The operator console: a full-screen view of a running plan with its agents' terminals live.
//!
//! Layers, so most of it is tested without a terminal: [`state`] (pure state machine over
//! [`action::Action`]s), [`keymap`] (chords → actions), [`ui`] (rendering the state with
//! ratatui), [`app`] (the event loop that runs effects, the engine and the input thread) and
//! [`terminal`] (raw mode, alternate screen, restore on every exit path).

pub mod action;
pub(crate) mod app;
pub(crate) mod attempts;
mod decide;
mod derived;
pub(crate) mod detach;
pub(crate) mod feed;
pub(crate) mod grid;
pub mod keymap;
pub mod model;
pub mod msg;
pub mod replay;
pub(crate) mod resize;
pub mod screens;
pub(crate) mod split;
pub mod state;
pub(crate) mod terminal;
/// Test fixtures: for the crate's own tests and, through the `testkit` feature (which the
/// dev-dependency on itself turns on), its integration tests; never in a release build.
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod theme;
pub mod ui;
pub(crate) mod update;
pub(crate) mod usage;
pub mod views;
pub mod wizard;
