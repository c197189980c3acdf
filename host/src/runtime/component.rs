//! A plugin's compiled component, linked in the host's engines: what its instances are made
//! from, and the indices of the exports they are called through.

use super::bindings::exports::palisade::hooks as ex;
use super::engines::Engines;
use super::sandbox::State;
use crate::point::{Interface, Point};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use wasmtime::component::{Component, InstancePre};

/// A plugin's component, compiled for the host's first engine and linked there, and in the
/// on-demand engine once an instance needs it.
pub(crate) struct Code {
    /// The component, compiled for the host's first engine.
    pub component: Component,
    /// The component linked in the host's first engine (shared with the plugin's spares).
    pub loaded: Arc<Loaded>,
    /// Set when one of its direct calls ran long ([`super::limits::DIRECT_TICKS`]): its calls
    /// go on a fiber from then on, where a long call yields to the executor at every tick.
    pub ran_long: AtomicBool,
    /// The component loaded into the on-demand engine, for the instances the pool has no
    /// slot for: at the first such instance.
    pub on_demand: OnceLock<Result<Loaded, String>>,
}

impl Code {
    /// `component`, linked in the host's first engine as `loaded`.
    pub fn new(component: Component, loaded: Arc<Loaded>) -> Code {
        Code {
            component,
            loaded,
            ran_long: AtomicBool::new(false),
            on_demand: OnceLock::new(),
        }
    }
}

impl Code {
    /// The component in the host's on-demand engine (loaded at the first call).
    pub(crate) fn on_demand(&self, engines: &Engines) -> Result<&Loaded, String> {
        self.on_demand
            .get_or_init(|| {
                let (engine, linker) = engines.on_demand()?;
                let code = self
                    .component
                    .serialize()
                    .map_err(|e| format!("cannot copy the compiled component: {e:#}"))?;
                // SAFETY: `code` is what wasmtime serialized of a component this process
                // compiled or verified, for an engine of the same configuration.
                #[expect(
                    unsafe_code,
                    reason = "loading code this process's engine just serialized"
                )]
                let component = unsafe { Component::deserialize(engine, &code) }
                    .map_err(|e| format!("cannot load into the on-demand engine: {e:#}"))?;
                let (pre, direct) = linker
                    .link(&component)
                    .map_err(|e| format!("cannot link in the on-demand engine: {e:#}"))?;
                Ok(Loaded::new(pre, direct))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The export indices of an instance from the pooled engine, or (`on_demand`) from the
    /// on-demand one.
    pub(crate) fn exports(&self, on_demand: bool) -> &Exports {
        match (on_demand, self.on_demand.get()) {
            (true, Some(Ok(loaded))) => &loaded.exports,
            _ => &self.loaded.exports,
        }
    }
}

/// A component ready to instantiate in one engine.
pub(crate) struct Loaded {
    /// The component linked: to the direct linker if it has all its imports.
    pre: InstancePre<State>,
    pub exports: Exports,
    /// Whether it was linked for direct calls: its instances are called directly, on the
    /// caller's thread ([`super::direct`]), until its plugin runs long.
    pub direct: bool,
    /// For one linked for direct calls, the same component linked to the full linker, for
    /// its instances made once its plugin ran long: linked at the first.
    relinked: OnceLock<Result<InstancePre<State>, String>>,
}

impl Loaded {
    pub fn new(pre: InstancePre<State>, direct: bool) -> Loaded {
        Loaded {
            exports: Exports::probe(&pre),
            pre,
            direct,
            relinked: OnceLock::new(),
        }
    }

    /// What its next instance is made from, and whether that instance is called directly.
    /// Once its plugin ran long (`ran_long`), a component linked for direct calls is linked
    /// again, to the full linker of its engine in `host`, so that its new instances wait
    /// on a fiber as every other plugin's do: the direct linker's clock waits hold the
    /// thread, which is only right in a direct call. Without `host`, it must have been linked
    /// again already.
    pub fn pre(
        &self,
        engines: Option<&Engines>,
        ran_long: bool,
    ) -> Result<(&InstancePre<State>, bool), String> {
        if !self.direct || !ran_long {
            return Ok((&self.pre, self.direct));
        }
        let relinked = match engines {
            Some(engines) => self.relinked.get_or_init(|| {
                engines
                    .linkers(self.pre.engine())?
                    .full(self.pre.component())
                    .map_err(|e| format!("cannot link for calls on a fiber: {e:#}"))
            }),
            None => self
                .relinked
                .get()
                .ok_or_else(|| "not linked for calls on a fiber yet".to_string())?,
        };
        relinked
            .as_ref()
            .map(|pre| (pre, false))
            .map_err(Clone::clone)
    }
}

macro_rules! exports {
    (version $version:literal; $($(#[doc = $doc:literal])* $variant:ident $snake:ident $wit:literal $method:ident ($($arg:ident: $ty:ty),*) -> ($($ret:ty)?) $mdoc:literal;)*) => {
        /// The export indices of the interfaces a component has; `None` where it lacks one.
        #[derive(Default, Clone)]
        pub(crate) struct Exports {
            $(pub $snake: Option<ex::$snake::GuestIndices>,)*
            /// `prepare`, called once per instance before its first call, if exported.
            pub prepare: Option<ex::prepare::GuestIndices>,
        }

        impl Exports {
            pub(crate) fn probe(pre: &InstancePre<State>) -> Exports {
                // `GuestIndices::new` fails when the component lacks the interface: keep what
                // loads.
                Exports {
                    $($snake: ex::$snake::GuestIndices::new(pre).ok(),)*
                    prepare: ex::prepare::GuestIndices::new(pre).ok(),
                }
            }

            pub fn has(&self, interface: Interface) -> bool {
                match interface {
                    $(Interface::$variant => self.$snake.is_some(),)*
                }
            }
        }
    };
}
palisade_wit::foreach_interface!(exports);

impl Exports {
    pub(crate) fn interfaces(&self) -> Vec<Interface> {
        Point::ALL
            .iter()
            .map(|p| p.interface())
            .fold(Vec::new(), |mut acc, i| {
                if self.has(i) && !acc.contains(&i) {
                    acc.push(i);
                }
                acc
            })
    }
}
